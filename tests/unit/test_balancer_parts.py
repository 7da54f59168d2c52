"""The balancer's small pieces: paths, config, state machine, errors, status table, checker."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from balancer import BalancerConfig, BalancerState, InvalidTransition, StreamFenced, quarantine
from balancer.claims import decode, encode
from balancer.machine import StateMachine
from balancer.status import format_table
from framework.kernel.errors import ConfigError, SessionizerError
from framework.kernel.paths import AppPaths
from framework.testing.members import ClaimObserver, MemberProcess, ownership_violations


def test_paths_follow_the_thesis_layout() -> None:
    paths = AppPaths("shop")
    assert paths.root == "/sessionizer/shop"
    assert paths.claim("shop.stream.0001") == "/sessionizer/shop/claimed_streams/shop.stream.0001"
    assert paths.consumer("n1") == "/sessionizer/shop/active_consumers/n1"
    assert paths.overflow(2) == "/sessionizer/shop/overflow_streams/2"
    assert paths.stream_state("s") == "/sessionizer/shop/stream_state/s"
    assert paths.quarantined("s") == "/sessionizer/shop/quarantined_streams/s"
    assert paths.quarantined_streams in paths.parents
    assert AppPaths("shop", "other").active_streams == "/other/shop/active_streams"


@pytest.mark.parametrize("bad", ["", ".", "..", "a/b", "a b", "tab\t"])
def test_paths_refuse_names_that_are_not_one_segment(bad: str) -> None:
    with pytest.raises(ConfigError):
        AppPaths(bad)
    with pytest.raises(ConfigError):
        AppPaths("shop").claim(bad)
    with pytest.raises(ConfigError):
        AppPaths("shop").quarantined(bad)


def test_config_is_validated() -> None:
    BalancerConfig("127.0.0.1:2181", "shop", "n1")
    with pytest.raises(ConfigError, match="no ZooKeeper address"):
        BalancerConfig("", "shop", "n1")
    with pytest.raises(ConfigError):
        BalancerConfig("h:1", "shop", "n/1")
    with pytest.raises(ConfigError):
        BalancerConfig("h:1", "shop", "n1", session_timeout=0)
    with pytest.raises(ConfigError):
        BalancerConfig("h:1", "shop", "n1", debounce=-1)


@pytest.mark.parametrize("name", ["pid", "capacity", "balance", "delivery"])
def test_what_a_member_announces_may_not_overwrite_its_membership_fields(name: str) -> None:
    agreed = {"delivery": "exactly-once"}
    BalancerConfig("h:1", "shop", "n1", agreed=agreed, announced={"hot_path": "compiled"})
    with pytest.raises(ConfigError, match=f"n1: announced \\['{name}'\\]"):
        BalancerConfig("h:1", "shop", "n1", agreed=agreed, announced={name: "x"})


def test_state_machine_counts_changes_and_refuses_impossible_ones() -> None:
    machine = StateMachine("n1")
    machine.to(BalancerState.JOINING)
    machine.to(BalancerState.BALANCING)
    machine.to(BalancerState.BALANCING)  # staying put is not a change
    assert machine.state_id == 2
    with pytest.raises(InvalidTransition, match="n1"):
        machine.to(BalancerState.DRAINED)
    machine.to(BalancerState.CLOSED)
    with pytest.raises(InvalidTransition):
        machine.to(BalancerState.JOINING)


def test_errors_name_stream_and_node_and_share_the_root() -> None:
    error = StreamFenced("shop.stream.0003", expected=7, node="n2")
    assert isinstance(error, SessionizerError)
    assert "shop.stream.0003" in str(error) and "n2" in str(error)


def test_znode_data_round_trips_and_tolerates_junk() -> None:
    assert decode(encode({"consumer": "n1", "epoch": 3})) == {"consumer": "n1", "epoch": 3}
    assert decode(b"\x00not json") == {}
    assert decode(None) == {}


def test_status_table_lists_consumers_and_streams() -> None:
    status = {
        "app": "shop",
        "consumers": [{"id": "n1", "streams": ["s0"]}],
        "streams": [
            {"name": "s0", "owner": "n1", "epoch": 4},
            {"name": "s1", "owner": None, "epoch": None},
        ],
    }
    table = format_table(status, wide=True)
    assert "1 consumer, 2 streams (1 claimed)" in table
    assert any(line.split() == ["s1", "-", "unowned", "-"] for line in table.splitlines())


def _member(tmp_path: Path, node: str, lines: list[tuple[float, str, list[str]]]) -> MemberProcess:
    log = tmp_path / f"{node}.jsonl"
    log.write_text(
        "".join(
            json.dumps({"event": event, "streams": streams, "timestamp": _iso(at)}) + "\n"
            for at, event, streams in lines
        )
    )
    return MemberProcess(node, None, log)  # type: ignore[arg-type]  # only the log is read


def _iso(at: float) -> str:
    return datetime.fromtimestamp(at, tz=UTC).isoformat()


def test_ownership_checker_catches_overlaps_and_wrong_snapshots(tmp_path: Path) -> None:
    a = _member(tmp_path, "a", [(10.0, "assigned", ["s0"]), (20.0, "revoked", ["s0"])])
    b = _member(tmp_path, "b", [(15.0, "assigned", ["s0"])])
    assert ownership_violations({"a": a, "b": b}) == ["s0: b took it while a still held it"]

    fine = _member(tmp_path, "b", [(21.0, "assigned", ["s0"])])
    assert ownership_violations({"a": a, "b": fine}) == []

    observer = ClaimObserver("unused:1", AppPaths("shop"), [])
    observer.claims = [(12.0, 12.1, {"s0": "b"})]  # ZooKeeper said b while a held it
    assert ownership_violations({"a": a, "b": fine}, observer) == [
        "s0: a held it while ZooKeeper said b"
    ]


def test_ownership_checker_exempts_members_cut_off_by_zookeeper(tmp_path: Path) -> None:
    a = _member(tmp_path, "a", [(10.0, "assigned", ["s0"]), (30.0, "lost", ["s0"])])
    b = _member(tmp_path, "b", [(15.0, "assigned", ["s0"])])
    assert ownership_violations({"a": a, "b": b}) == []
    killed = _member(tmp_path, "a", [(10.0, "assigned", ["s0"])])
    assert ownership_violations({"a": killed, "b": b}, ended={"a": 14.0}) == []
    assert ownership_violations({"a": killed, "b": b}) != []


def test_status_table_shows_corrupt_streams_and_why() -> None:
    status = {
        "app": "shop",
        "consumers": [{"id": "n1", "streams": ["s0"]}],
        "streams": [
            {"name": "s0", "owner": "n1", "epoch": 4, "corrupt": None, "safe_offset": 7},
            {
                "name": "s1",
                "owner": None,
                "epoch": None,
                "corrupt": "bad marker byte",
                "safe_offset": None,
            },
        ],
    }
    lines = format_table(status, wide=True).splitlines()
    assert "1 consumer, 2 streams (1 claimed, 1 corrupt)" in lines[0]
    assert ["STREAM", "OWNER", "STATE", "EPOCH", "SAFE_OFFSET"] in [line.split() for line in lines]
    assert ["s0", "n1", "owned", "4", "7"] in [line.split() for line in lines]
    assert ["s1", "-", "corrupt", "-", "-"] in [line.split() for line in lines]
    assert lines[-1] == "s1: bad marker byte"
    assert "streams reset STREAM --from-offset N" in lines[-2]


def test_quarantine_marker_is_small_json_with_reason_node_and_time() -> None:
    data = quarantine.marker("x" * 10_000, "n1", at=1700000000.12345)
    assert data == {"reason": "x" * quarantine.MAX_REASON_CHARS, "node": "n1", "at": 1700000000.123}
    assert decode(encode(data)) == data
