"""A stream's load (`balancer.load`): measured, encoded, and fed by the node from its loop."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from balancer.config import BalancerConfig
from balancer.load import LoadMeter, StreamLoad
from balancer.load_plan import LoadPolicy
from balancer.status import format_table
from framework.kernel.errors import ConfigError
from framework.node.node import Node
from framework.testkit.memory import (
    LocalCoordinator,
    MemoryLog,
    memory_parts,
    node_config,
    traffic_log,
)
from router.generator import generate_fragments
from sessionizer.examples.weblog import WebSessions
from sessionizer.sinks import MemorySink
from state.store import VersionedMemory


def test_meter_converges_to_the_rate_and_shares_busy_time_by_fragments() -> None:
    meter = LoadMeter(window=3.0)
    counts, busy = {"a": 0, "b": 0}, 0.0
    for second in range(30):
        meter.sample(float(second), counts, busy)
        counts = {"a": counts["a"] + 30, "b": counts["b"] + 10}
        busy += 0.4
    rate_a, busy_a = meter.estimate("a") or (0.0, 0.0)
    rate_b, busy_b = meter.estimate("b") or (0.0, 0.0)
    assert rate_a == pytest.approx(30.0) and rate_b == pytest.approx(10.0)
    assert busy_a == pytest.approx(0.3) and busy_b == pytest.approx(0.1)


def test_meter_knows_nothing_before_a_whole_window_and_restarts_after_a_reset() -> None:
    meter = LoadMeter(window=3.0)
    meter.sample(0.0, {"a": 0}, 0.0)
    meter.sample(1.0, {"a": 100}, 0.0)
    assert meter.estimate("a") is None  # measured for 1 s of a 3 s window
    for second in range(2, 5):
        meter.sample(float(second), {"a": 100 * second}, 0.0)
    assert meter.estimate("a") == pytest.approx((100.0, 0.0))
    meter.sample(5.0, {"a": 3}, 0.0)  # the stream was resumed afresh: its count restarted
    assert meter.estimate("a") is None
    meter.sample(6.0, {}, 0.0)  # no longer ours (or replaying): forgotten
    assert meter.estimate("a") is None


def test_meter_decays_when_traffic_stops() -> None:
    meter = LoadMeter(window=2.0)
    for second in range(10):
        meter.sample(float(second), {"a": 50 * second}, 0.0)
    for second in range(10, 30):
        meter.sample(float(second), {"a": 450}, 0.0)
    rate, _ = meter.estimate("a") or (math.inf, 0.0)
    assert rate < 0.01


loads = st.builds(
    StreamLoad,
    rate=st.none() | st.floats(0, 1e6),
    busy=st.floats(0, 10),
    node=st.text(max_size=10),
    moved_at=st.none() | st.floats(0, 2e9),
)


@given(loads)
def test_encoded_load_decodes_to_itself_up_to_rounding(load: StreamLoad) -> None:
    decoded = StreamLoad.decode(load.encode())
    assert decoded is not None and decoded.node == load.node
    if load.rate is None:
        assert decoded.rate is None and decoded.busy is None
    else:
        assert decoded.rate == pytest.approx(load.rate, abs=1e-3)
    assert (decoded.moved_at is None) == (load.moved_at is None)


@given(st.binary(max_size=64))
def test_decoding_anything_never_raises(data: bytes) -> None:
    decoded = StreamLoad.decode(data)
    if decoded is not None and decoded.rate is not None:
        assert decoded.rate >= 0 and math.isfinite(decoded.rate)


def test_unusable_rates_read_as_unknown() -> None:
    assert StreamLoad.decode(b'{"rate": -1, "busy": 0}') == StreamLoad(None, None, "", None)
    assert StreamLoad.decode(b'{"rate": "fast"}') == StreamLoad(None, None, "", None)
    assert StreamLoad.decode(b"[1]") is None
    assert StreamLoad.decode(b'{"moved_at": 5.5}') == StreamLoad(None, None, "", 5.5)


def test_node_reports_fragment_counts_and_busy_time_from_its_loop() -> None:
    fragments = list(generate_fragments(60, seed=3))
    log = MemoryLog(traffic_log(fragments, 4))
    coordinators: list[LocalCoordinator] = []
    node = Node(
        node_config(),
        processor=WebSessions(),
        parts=memory_parts(log, MemorySink(), VersionedMemory(), log.caught_up, coordinators),
    )
    node.run()
    reports = coordinators[0].load_reports
    assert reports, "the loop never reported its load"
    counts, busy = reports[0]  # the first step: every stream just assigned, none replaying
    assert set(counts) == set(log.streams) and busy >= 0
    assert all(isinstance(n, int) and n >= 0 for n in counts.values())


def test_status_table_shows_stream_and_node_loads() -> None:
    status = {
        "app": "shop",
        "balance": "load",
        "consumers": [{"id": "n1", "streams": ["s0"]}, {"id": "n2", "streams": ["s1"]}],
        "node_loads": {"n1": 35.5, "n2": 2.5},
        "streams": [
            {"name": "s0", "owner": "n1", "epoch": 4, "load": 35.5, "busy": 0.01},
            {"name": "s1", "owner": "n2", "epoch": 2, "load": None, "busy": None},
        ],
    }
    lines = [line.split() for line in format_table(status, wide=True).splitlines()]
    assert ["balance:", "load"] in lines
    assert ["CONSUMER", "STREAMS", "LOAD"] in lines and ["n1", "1", "35.5"] in lines
    assert ["STREAM", "OWNER", "STATE", "EPOCH", "LOAD", "BUSY"] in lines
    assert ["s0", "n1", "owned", "4", "35.5", "0.01"] in lines
    assert ["s1", "n2", "owned", "2", "-", "-"] in lines
    unloaded = {**status, "node_loads": {}, "balance": None}
    assert ["CONSUMER", "STREAMS"] in [line.split() for line in format_table(unloaded).splitlines()]


@pytest.mark.parametrize(
    "settings",
    [{"balance": "fair"}, {"balance_tolerance": 0.0}, {"balance_interval": -1.0}],
)
def test_node_refuses_nonsense_balance_settings(settings: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match="--balance"):
        node_config(**settings)


def test_balancer_config_carries_the_load_policy() -> None:
    config = BalancerConfig("zk:1", "shop", "n1", balance="load", load_interval=6.0)
    assert config.load_policy == LoadPolicy(tolerance=0.2, margin=0.05, max_moves=4, interval=6.0)
    assert (config.load_window, config.load_publish_interval, config.load_pass_interval) == (
        2.0,
        1.0,
        1.2,
    )
    with pytest.raises(ConfigError, match="tolerance"):
        BalancerConfig("zk:1", "shop", "n1", load_tolerance=1.5)


def test_an_absurd_published_rate_is_no_measurement_and_the_plan_survives_it() -> None:
    absurd = StreamLoad.decode(b'{"node":"n1","rate":9e307,"busy":0.5}')
    assert absurd is not None and absurd.rate is None and absurd.busy is None
    assert StreamLoad.decode(b'{"node":"n1","rate":1e999,"busy":0.5}') is None  # inf: not JSON
    assert StreamLoad.decode(b'{"node":"n1","rate":5,"busy":0.5,"moved_at":1e300}') == StreamLoad(
        5.0, 0.5, "n1", None
    )


def test_deeply_nested_data_is_not_a_load() -> None:
    assert StreamLoad.decode(b"[" * 100_000) is None
    assert StreamLoad.decode(b'{"rate":' + b"[" * 100_000) is None
