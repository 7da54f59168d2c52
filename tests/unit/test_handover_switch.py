"""`--handover off`: a planned stop writes no handover, the next owner uses none and replays;
the output is still exact once duplicates are dropped. And the flag reaches the node's config."""

from __future__ import annotations

import argparse
from typing import Any

import pytest
from structlog.testing import capture_logs

from framework.commands import node as node_command
from framework.commands.options import CommandParser, common_parser
from framework.kernel.errors import ConfigError
from framework.testing.handover_runs import after_polls, run_node, session_ids
from framework.testkit.memory import MemoryLog, traffic_log
from router.generator import generate_fragments
from sessionizer.records import FinishedSession
from state.handover import HandoverStore, MemoryHandoverLog, MemoryPointers
from state.store import VersionedMemory

STREAMS = 4
FRAGMENTS = list(generate_fragments(160, seed=11))


@pytest.fixture(scope="module")
def baseline() -> list[FinishedSession]:
    log = MemoryLog(traffic_log(FRAGMENTS, STREAMS))
    store = HandoverStore(MemoryHandoverLog(), MemoryPointers())
    _, sink = run_node(log, VersionedMemory(), store, log.caught_up, handover=True)
    assert sink.sessions
    return sink.sessions


def test_off_writes_no_handover_and_the_next_owner_replays(
    baseline: list[FinishedSession],
) -> None:
    log, memory = MemoryLog(traffic_log(FRAGMENTS, STREAMS)), VersionedMemory()
    handover_log = MemoryHandoverLog()
    store = HandoverStore(handover_log, MemoryPointers())
    first, first_sink = run_node(log, memory, store, after_polls(6), handover=False)
    assert first.handover.counts["written"] == 0 and handover_log.records == []
    with capture_logs() as events:
        second, second_sink = run_node(log, memory, store, log.caught_up, handover=False)
    assert second.handover.counts["used"] == 0
    assert second.handover.replayed > 0, "nothing was open at the stop: the replay is untested"
    resumed = [e for e in events if e["event"] == "stream_resumed" and e["replay"] > 0]
    assert resumed and all(e["reason"] == "disabled: --handover off" for e in resumed)
    delivered = first_sink.sessions + second_sink.sessions
    assert sorted(set(session_ids(delivered))) == session_ids(baseline), "a session lost or extra"


def test_off_ignores_a_handover_an_earlier_owner_left(baseline: list[FinishedSession]) -> None:
    log, memory = MemoryLog(traffic_log(FRAGMENTS, STREAMS)), VersionedMemory()
    store = HandoverStore(MemoryHandoverLog(), MemoryPointers())
    first, first_sink = run_node(log, memory, store, after_polls(6), handover=True)
    assert first.handover.counts["written"] >= 1, "nothing was open at the stop: no test"
    second, second_sink = run_node(log, memory, store, log.caught_up, handover=False)
    assert second.handover.counts["used"] == 0 and second.handover.replayed > 0
    delivered = first_sink.sessions + second_sink.sessions
    assert sorted(set(session_ids(delivered))) == session_ids(baseline)


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = CommandParser()  # resolves the environment-backed defaults, as the CLI's does
    subparsers = parser.add_subparsers()
    node_command.add_parser(subparsers, common_parser())
    return parser.parse_args(["node", "--processor", "m:C", *argv])


def test_the_flag_and_its_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _parse([]).handover == "on"
    assert _parse(["--handover", "off"]).handover == "off"
    monkeypatch.setenv("SESSIONIZER_HANDOVER", "off")
    assert _parse([]).handover == "off"
    assert node_command._switch("--handover", "off") is False
    assert node_command._switch("--handover", "on") is True
    with pytest.raises(ConfigError, match="--handover must be on or off"):
        node_command._switch("--handover", "maybe")


def test_run_passes_the_switch_to_the_node(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[Any] = []
    monkeypatch.setattr(node_command, "Node", lambda config: built.append(config) or config)
    monkeypatch.setattr(node_command, "run_until_signalled", lambda node: 0)
    # No cluster here: the start-up checks against ZooKeeper are tested in test_cli_errors.
    monkeypatch.setattr(node_command, "require_streams", lambda connection: None)
    monkeypatch.setattr(node_command, "check_session_timeout", lambda connection, timeout: None)
    args = _parse(["--handover", "off", "--zk", "z:1", "--bootstrap", "k:1"])
    assert node_command.run(args) == 0
    assert built[0].handover is False
