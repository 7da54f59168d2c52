"""`/metrics`, `/healthz` and `/readyz` of a node, over the in-process fakes of its parts."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

from prometheus_client import generate_latest
from structlog.testing import capture_logs

from balancer.config import BalancerListener
from balancer.machine import BalancerState
from framework.node.metrics import LoopHealth
from framework.node.node import Node
from framework.node.parts import NodeParts
from framework.testing.members import wait_for
from framework.testing.metrics import http_get, metric_samples
from framework.testkit.memory import (
    FlushingSink,
    LocalCoordinator,
    MemoryLog,
    memory_parts,
    node_config,
)
from framework.testkit.memory import traffic_log as log_of
from router.generator import generate_fragments
from sessionizer.examples.weblog import WebSessions
from sessionizer.sinks import MemorySink
from state.store import FencedStateStore, VersionedMemory

FRAGMENTS = list(generate_fragments(80, seed=3))


def test_probes_follow_the_loop_and_the_counters_match_the_node_totals() -> None:
    log = MemoryLog(log_of(FRAGMENTS, 3), per_poll=2)
    probes: dict[str, tuple[int, str]] = {}

    def probe(coordinator: LocalCoordinator) -> None:
        port = node.metrics_port
        if coordinator.polls == 20:
            probes["ready"] = http_get(port, "/readyz")
            probes["alive"] = http_get(port, "/healthz")
            coordinator.paused = True
            probes["paused"] = http_get(port, "/readyz")
            coordinator.paused = False
            probes["metrics"] = http_get(port, "/metrics")

    sink = FlushingSink(fail_flushes={2})  # a sink failure shows in the counters too
    node = Node(
        node_config(metrics_port=0, metrics_host="127.0.0.1"),
        processor=WebSessions(),
        parts=memory_parts(log, sink, VersionedMemory(), log.caught_up, on_poll=probe),
    )
    node.run()
    assert probes["ready"][0] == 200 and probes["alive"][0] == 200
    assert probes["paused"] == (503, "not ok: paused: ZooKeeper is unreachable\n")
    assert "sessionizer_fragments_consumed_total" in probes["metrics"][1]

    assert node.metrics is not None
    final = metric_samples(generate_latest(node.metrics.registry).decode())
    totals = node.stats.totals([])
    label = (("node", "n1"),)
    for metric, key in [
        ("sessionizer_fragments_consumed_total", "fragments"),
        ("sessionizer_sessions_emitted_total", "sessions"),
        ("sessionizer_sink_send_failures_total", "sink_failures"),
        ("sessionizer_rewinds_total", "rewinds"),
        ("sessionizer_commits_total", "commits"),
    ]:
        assert final[(metric, label)] == totals[key], metric
    assert totals["sessions"] > 0 and totals["sink_failures"] == 1
    assert final[("sessionizer_commit_latency_seconds_count", label)] > 0


def _blocked_in_a_call_with_no_deadline(until: Callable[[], object]) -> None:
    """Stands for the call a node's loop hung in (librdkafka's `Producer.close()`)."""
    wait_for(until, 60, "the node to log loop_stalled")


def test_a_loop_blocked_in_a_call_is_logged_with_that_call_and_healthz_fails() -> None:
    log = MemoryLog(log_of(FRAGMENTS, 3), per_poll=2)
    healthz: list[tuple[int, str]] = []
    with capture_logs() as logs:

        def stalls() -> list[Any]:
            return [e for e in logs if e["event"] == "loop_stalled"]

        def probe(coordinator: LocalCoordinator) -> None:
            if coordinator.polls == 5:  # the loop thread blocks here, mid-run
                _blocked_in_a_call_with_no_deadline(stalls)
                healthz.append(http_get(node.metrics_port, "/healthz"))

        config = node_config(
            metrics_port=0, metrics_host="127.0.0.1", delivery_timeout=0.1, session_timeout=0.1
        )  # a stall limit of 5.2 s
        node = Node(
            config,
            processor=WebSessions(),
            parts=memory_parts(log, MemorySink(), VersionedMemory(), log.caught_up, on_poll=probe),
        )
        node.run()
    (stalled,) = stalls()
    assert stalled["node"] == "n1" and stalled["stalled_s"] >= config.stall_limit
    assert "_blocked_in_a_call_with_no_deadline" in stalled["stack"]
    assert healthz[0][0] == 503, healthz
    assert [e for e in logs if e["event"] == "loop_recovered"], "the loop stepped again"


class CountingLog(MemoryLog):
    """A `MemoryLog` that counts the brokers' round trips: each `bounds` call is one."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.bounds_calls = 0

    def bounds(self, streams: Sequence[str]) -> dict[str, tuple[int, int]]:
        """(start, end) of each stream, counted."""
        self.bounds_calls += 1
        return super().bounds(streams)


def test_a_publish_reads_the_ends_the_consumer_saw_and_never_waits_on_a_broker() -> None:
    """Asking the brokers for 64 streams' ends took 30 s behind the fetch's long poll.

    The loop publishes every second, so a publish must not ask at all: only the
    assignment's position check does (stats reports are an hour apart here).
    """
    log = CountingLog(log_of(FRAGMENTS, 8), per_poll=3)
    scrapes: dict[str, tuple[str, dict[str, int]]] = {}

    def scrape_after_the_first_publish(coordinator: LocalCoordinator) -> None:
        if coordinator.polls == 2:
            behind = {s: len(log.streams[s]) - p for s, p in log.positions.items()}
            scrapes["first"] = (http_get(node.metrics_port, "/metrics")[1], behind)

    node = Node(
        node_config(metrics_port=0, metrics_host="127.0.0.1"),
        processor=WebSessions(),
        parts=memory_parts(
            log,
            MemorySink(),
            VersionedMemory(),
            log.caught_up,
            on_poll=scrape_after_the_first_publish,
        ),
    )
    node.run()
    assert log.bounds_calls == 1, f"{log.bounds_calls} bounds() calls, 1 expected (assignment)"
    text, behind = scrapes["first"]
    lag = {
        dict(labels)["stream"]: value
        for (name, labels), value in metric_samples(text).items()
        if name == "sessionizer_stream_lag"
    }
    assert lag == behind and len(lag) == 8 and all(lag.values()), (lag, behind)


class SuspendedCoordinator(LocalCoordinator):
    """Its connection drops (`connected` goes False on kazoo's thread) before the loop's poll.

    The real `Balancer` sets `paused` only when the loop applies the SUSPENDED
    event, which a step blocked on a broker or a flush delays.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.link_up = True

    @property
    def connected(self) -> bool:
        """What kazoo's connection thread says now."""
        return self.link_up


def test_readyz_answers_503_once_the_connection_drops_before_the_loop_notices() -> None:
    log = MemoryLog(log_of(FRAGMENTS, 3), per_poll=2)
    memory = VersionedMemory()
    probes: dict[str, tuple[int, str]] = {}

    def probe(coordinator: LocalCoordinator) -> None:
        assert isinstance(coordinator, SuspendedCoordinator)
        if coordinator.polls == 10:
            coordinator.link_up = False
            probes["dropped"] = http_get(node.metrics_port, "/readyz")
            probes["alive"] = http_get(node.metrics_port, "/healthz")
            coordinator.link_up = True
            probes["back"] = http_get(node.metrics_port, "/readyz")

    def coordinator(listener: BalancerListener) -> SuspendedCoordinator:
        built = SuspendedCoordinator(listener, memory, sorted(log.streams), log.caught_up)
        built.on_poll = probe
        return built

    node = Node(
        node_config(metrics_port=0, metrics_host="127.0.0.1"),
        processor=WebSessions(),
        parts=NodeParts(log, MemorySink(), FencedStateStore(memory), coordinator),
    )
    node.run()
    assert probes["dropped"] == (503, "not ok: ZooKeeper connection down\n")
    assert probes["alive"][0] == 200
    assert probes["back"][0] == 200


def test_a_stalled_loop_fails_both_probes() -> None:
    """A step blocked past the stall limit: /healthz says so, and the node is not ready either."""
    health = LoopHealth(stall_limit=30.0, stopping=threading.Event())
    coordinator = LocalCoordinator(idle_listener(), VersionedMemory(), [], lambda: False)
    coordinator.state = BalancerState.STABLE
    health.coordinator = coordinator
    assert health.alive()[0] and health.ready() == (True, "coordinator stable")
    health.last_step = time.monotonic() - 31.0
    alive, why = health.alive()
    assert not alive and why.startswith("last loop step 31.")
    assert health.ready() == (False, f"loop stalled: {health.alive()[1]}")


def idle_listener() -> BalancerListener:
    """A listener nobody calls (the coordinator is only read here)."""
    return cast("BalancerListener", object())
