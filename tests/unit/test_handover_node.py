"""The node's handover, in-process: a stopped node hands its streams over, the next one replays
nothing and delivers no session twice; a bad handover makes it replay, still exactly."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from framework.testing.handover_runs import after_polls, run_node, session_ids
from framework.testkit.memory import MemoryLog, traffic_log
from router.generator import generate_fragments
from sessionizer.examples.weblog import WebSessions
from sessionizer.records import FinishedSession
from state.handover import HandoverStore, MemoryHandoverLog, MemoryPointers
from state.store import VersionedMemory

STREAMS = 4
FRAGMENTS = list(generate_fragments(160, seed=11))


@pytest.fixture(scope="module")
def baseline() -> list[FinishedSession]:
    log = MemoryLog(traffic_log(FRAGMENTS, STREAMS))
    _, sink = run_node(log, VersionedMemory(), None, log.caught_up)
    assert sink.sessions
    return sink.sessions


def test_a_planned_stop_hands_over_and_the_next_owner_replays_nothing(
    baseline: list[FinishedSession],
) -> None:
    log, memory = MemoryLog(traffic_log(FRAGMENTS, STREAMS)), VersionedMemory()
    store = HandoverStore(MemoryHandoverLog(), MemoryPointers())
    first, first_sink = run_node(log, memory, store, after_polls(6))
    assert first.handover.counts["written"] >= 1, "nothing was open at the stop: no test"
    second, second_sink = run_node(log, memory, store, log.caught_up)
    assert second.handover.counts["used"] == first.handover.counts["written"]
    assert second.handover.replayed == 0
    delivered = first_sink.sessions + second_sink.sessions
    assert session_ids(delivered) == session_ids(baseline), "a session lost or delivered twice"
    by_id = {session.session_id: session for session in baseline}
    assert all(session == by_id[session.session_id] for session in delivered)
    assert isinstance(store.pointers, MemoryPointers)
    assert all(note["replayed"] == 0 for note in store.pointers.notes.values())


def test_a_corrupt_handover_replays_and_the_output_is_exact_after_deduplication(
    baseline: list[FinishedSession],
) -> None:
    log, memory = MemoryLog(traffic_log(FRAGMENTS, STREAMS)), VersionedMemory()
    handover_log = MemoryHandoverLog()
    store = HandoverStore(handover_log, MemoryPointers())
    _, first_sink = run_node(log, memory, store, after_polls(6))
    for index, (stream, data) in enumerate(handover_log.records):
        handover_log.records[index] = (stream, data[:-1] + bytes([data[-1] ^ 1]))
    written = len(handover_log.records)
    second, second_sink = run_node(log, memory, store, log.caught_up)
    assert second.handover.counts["used"] == 0
    assert second.handover.counts["corrupt"] == written > 0
    assert second.handover.replayed > 0
    delivered = first_sink.sessions + second_sink.sessions
    assert sorted(set(session_ids(delivered))) == session_ids(baseline)


class Sets(WebSessions):
    """WebSessions with a set in its session: msgpack cannot carry it, so no handover."""

    def open(self, key: str, fragment: Any) -> Any:
        session = super().open(key, fragment)
        session["paths"] = set()
        return session

    def close(self, key: str, session: Any) -> Any:
        session.pop("paths", None)
        return super().close(key, session)


def test_a_processor_that_cannot_dump_replays_with_one_warning() -> None:
    log, memory = MemoryLog(traffic_log(FRAGMENTS, STREAMS)), VersionedMemory()
    store = HandoverStore(MemoryHandoverLog(), MemoryPointers())
    with capture_logs() as events:
        first, _ = run_node(log, memory, store, after_polls(6), Sets())
    assert first.handover.counts["undumpable"] >= 2, "one stream only: the warning count is moot"
    warnings = [e for e in events if e["event"] == "handover_unavailable"]
    assert len(warnings) == 1 and "dump_session" in warnings[0]["reason"]
    second, _ = run_node(log, memory, store, log.caught_up, Sets())
    assert second.handover.counts["used"] == 0 and second.handover.replayed > 0
