"""The node loop's ordering guarantees, in-process, with fakes of its four parts.

Every test runs a `Node` over a `MemoryLog` of generated traffic, injects one
fault, lets the node (or a second node resuming from the same store) finish,
and compares what the sinks confirmed with an uninterrupted run: every
session delivered, duplicates only with identical content.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from balancer.errors import MembersDisagree
from framework.node.errors import NodeCrashed
from framework.node.node import Node
from framework.testkit.memory import (
    FlushingSink,
    LocalCoordinator,
    MemoryLog,
    delivered,
    memory_parts,
    node_config,
    traffic_log,
)
from router.generator import generate_fragments
from sessionizer.examples.weblog import WebSessions
from sessionizer.records import FinishedSession
from sessionizer.sinks import MemorySink
from state.errors import StateError
from state.record import StreamState
from state.store import FencedStateStore, VersionedMemory

STREAMS = 4
FRAGMENTS = list(generate_fragments(120, seed=7))


def run_node(
    log: MemoryLog,
    sink: MemorySink,
    memory: VersionedMemory,
    *,
    until: Callable[[], bool] | None = None,
    on_poll: Callable[[LocalCoordinator], None] | None = None,
    store: FencedStateStore | None = None,
    **config: Any,
) -> Node:
    """Run one node to the end (or until its crash) over the shared log and store."""
    node_parts = memory_parts(
        log, sink, memory, until or log.caught_up, on_poll=on_poll, store=store
    )
    node = Node(node_config(**config), processor=WebSessions(), parts=node_parts)
    node.run()
    return node


@pytest.fixture(scope="module")
def baseline() -> dict[str, FinishedSession]:
    """What an uninterrupted node delivers."""
    sink = MemorySink()
    run_node(MemoryLog(traffic_log(FRAGMENTS, STREAMS)), sink, VersionedMemory())
    sessions, differing = delivered([sink])
    assert sessions and not differing
    return sessions


def assert_exact(baseline: dict[str, FinishedSession], *sinks: MemorySink) -> None:
    """Every baseline session delivered, nothing else, duplicates identical."""
    sessions, differing = delivered(sinks)
    assert differing == []
    assert sorted(set(baseline) - set(sessions)) == [], "sessions lost"
    assert sorted(set(sessions) - set(baseline)) == [], "sessions that should not exist"
    assert all(sessions[i] == baseline[i] for i in baseline)


@pytest.mark.parametrize("failing_flush", [2, 3, 5])
def test_a_failed_flush_rewinds_and_the_next_commit_covers_nothing_lost(
    baseline: dict[str, FinishedSession], failing_flush: int
) -> None:
    sink = FlushingSink(fail_flushes={failing_flush})
    node = run_node(MemoryLog(traffic_log(FRAGMENTS, STREAMS)), sink, VersionedMemory())
    assert sink.lost > 0, "the fault must drop output in flight, or this test proves nothing"
    assert node.stats.rewinds > 0 and node.stats.sink_failures == 1
    assert_exact(baseline, sink.durable)


def test_a_send_that_raises_rewinds_its_streams(baseline: dict[str, FinishedSession]) -> None:
    sink = FlushingSink(fail_emits={12, 40})
    node = run_node(MemoryLog(traffic_log(FRAGMENTS, STREAMS)), sink, VersionedMemory())
    assert sink.lost > 0 and node.stats.sink_failures == 2
    assert_exact(baseline, sink.durable)


_REFUSAL = MembersDisagree(
    "n1", "web", {"delivery": "at-least-once"}, {"delivery": {"n0": "exactly-once"}}
)


@pytest.mark.parametrize(
    ("error", "raised", "says"),
    [
        (TypeError("unexpected"), NodeCrashed, "unexpected"),
        (RuntimeError("unexpected"), NodeCrashed, "unexpected"),
        (KeyError("unexpected"), NodeCrashed, "unexpected"),
        # A `ConfigError` (another delivery mode than the app's members) is the node's
        # one-line refusal, not a crash; like a crash, it commits nothing after it.
        (_REFUSAL, MembersDisagree, "n0 runs exactly-once"),
    ],
)
def test_an_exception_in_the_loop_commits_nothing_after_it_and_a_new_owner_loses_nothing(
    baseline: dict[str, FinishedSession], error: Exception, raised: type[Exception], says: str
) -> None:
    memory = VersionedMemory()
    log = MemoryLog(traffic_log(FRAGMENTS, STREAMS))
    first = FlushingSink(fail_emits={25}, raise_on_emit=lambda: error)
    with pytest.raises(raised, match=says):
        run_node(log, first, memory)
    assert first.lost > 0
    second = FlushingSink()
    run_node(log, second, memory)
    assert_exact(baseline, first.durable, second.durable)


class FailingCommits(FencedStateStore):
    """Commits fail (as a ZooKeeper error would) while `failing` is set."""

    failing = True

    def commit(self, stream: str, state: StreamState) -> None:
        if self.failing:
            raise StateError(f"stream {stream}: ZooKeeper did not answer (told to)")
        super().commit(stream, state)


def test_at_most_once_output_held_back_stays_bounded_while_commits_fail(
    baseline: dict[str, FinishedSession],
) -> None:
    memory = VersionedMemory()
    store = FailingCommits(memory)
    largest = 0

    def watch(coordinator: LocalCoordinator) -> None:
        nonlocal largest
        tasks = coordinator.listener._tasks.values()  # type: ignore[attr-defined]
        largest = max([largest, *(len(t.unsent) for t in tasks)])
        if coordinator.polls == 150:
            store.failing = False

    log = MemoryLog(traffic_log(FRAGMENTS, STREAMS), per_poll=1)
    sink = MemorySink()
    run_node(
        log, sink, memory, store=store, on_poll=watch, delivery="at-most-once", max_unsent=3,
        until=lambda: not store.failing and len(log.positions) == STREAMS and log.caught_up(),
    )  # fmt: skip
    # One record may finish several sessions at once (an END closes them all): that much over.
    assert 3 <= largest < 3 + 40
    assert_exact(baseline, sink)


def test_a_stop_while_paused_leaves_within_the_session_timeout_without_committing(
    baseline: dict[str, FinishedSession],
) -> None:
    memory = VersionedMemory()
    log = MemoryLog(traffic_log(FRAGMENTS, STREAMS), per_poll=1)
    versions: dict[str, int] = {}

    def pause_then_stop(coordinator: LocalCoordinator) -> None:
        if coordinator.polls == 60 and not coordinator.paused:
            coordinator.paused = True  # ZooKeeper suspended, and it stays away
            versions.update({s: memory.read(s)[1] for s in coordinator.streams})
            coordinator.listener.stop()  # type: ignore[attr-defined]

    first = FlushingSink()
    run_node(log, first, memory, until=lambda: False, on_poll=pause_then_stop)
    assert versions and {s: memory.read(s)[1] for s in versions} == versions
    second = FlushingSink()
    run_node(log, second, memory)
    assert_exact(baseline, first.durable, second.durable)


def test_a_corrupt_state_record_is_quarantined_and_the_other_streams_go_on(
    baseline: dict[str, FinishedSession],
) -> None:
    memory = VersionedMemory()
    log = MemoryLog(traffic_log(FRAGMENTS, STREAMS))
    bad = sorted(log.streams)[1]
    memory.write(bad, b"\x00\x93garbage", 0)
    built: list[LocalCoordinator] = []
    sink = MemorySink()
    node = Node(
        node_config(),
        processor=WebSessions(),
        parts=memory_parts(log, sink, memory, log.caught_up, built),
    )
    node.run()
    assert list(built[0].quarantined) == [bad]
    assert "corrupt state" in built[0].quarantined[bad]
    assert memory.read(bad)[0] == b"\x00\x93garbage", "nothing resets state implicitly"
    expected = {i: s for i, s in baseline.items() if s.stream != bad}
    assert_exact(expected, sink)


def test_a_stored_position_past_the_log_end_is_refused_loudly() -> None:
    memory = VersionedMemory()
    log = MemoryLog(traffic_log(FRAGMENTS, STREAMS))
    recreated = sorted(log.streams)[0]
    end = len(log.streams[recreated])
    state = StreamState(recreated, safe_offset=end + 50, committed_offset=end + 80)
    memory.write(recreated, state.encode(), 0)
    built: list[LocalCoordinator] = []
    sink = MemorySink()
    node = Node(
        node_config(),
        processor=WebSessions(),
        parts=memory_parts(log, sink, memory, log.caught_up, built),
    )
    node.run()
    assert "past the log end" in built[0].quarantined[recreated]
    assert all(s.stream != recreated for s in sink.sessions)
