"""No record is ever skipped: the node over the real confluent source and a fake librdkafka.

Each test runs a `Node` (fakes of its coordinator, sink and store from
`framework.testkit.memory`) over the real `ConfluentRecordSource`, whose
librdkafka `Consumer` is `framework.testing.confluent.LogConsumer`, injects one
fault into the fetches, and compares the sessions delivered with the batch
definition (`framework.verify`). The last one runs over `MemoryLog` with a sink
that fails mid-batch: records fetched before a rewind are stale, not a gap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from balancer.config import BalancerListener
from framework.node.node import Node
from framework.node.parts import NodeParts
from framework.testing.confluent import LogConsumer, install
from framework.testkit import APP
from framework.testkit.memory import (
    FlushingSink,
    LocalCoordinator,
    MemoryLog,
    memory_parts,
    node_config,
    traffic_log,
)
from framework.verify import expected_sessions, verify_sessions
from router.generator import generate_fragments
from router.hashing import stream_for_key
from router.naming import stream_name
from sessionizer.examples.weblog import WebSessions
from sessionizer.sinks import MemorySink
from state.store import FencedStateStore, VersionedMemory

STREAMS = 4
FRAGMENTS = list(generate_fragments(150, seed=11))
NAMES = [stream_name(APP, i) for i in range(STREAMS)]
BAD = NAMES[1]  # fetched between two others, so its error lands mid-batch
POLLS = 5000  # a bound on a run that would never stop otherwise


def run_node(
    monkeypatch: pytest.MonkeyPatch,
    consumer: LogConsumer,
    fault: Callable[[LogConsumer, LocalCoordinator], None],
    *,
    but: Sequence[str] = (),
) -> tuple[Node, MemorySink, LocalCoordinator]:
    """Run a node until every stream (`but` these) is read to its end; `fault` at each poll."""
    source = install(monkeypatch, consumer)
    memory, sink = VersionedMemory(), MemorySink()
    built: list[LocalCoordinator] = []

    def done() -> bool:
        return consumer.caught_up(but=but) or consumer.consumed > POLLS

    def coordinator(listener: BalancerListener) -> LocalCoordinator:
        made = LocalCoordinator(listener, memory, NAMES, done)
        made.on_poll = lambda c: fault(consumer, c)
        built.append(made)
        return made

    parts = NodeParts(source, sink, FencedStateStore(memory), coordinator)
    node = Node(node_config(), processor=WebSessions(), parts=parts)
    node.run()
    assert consumer.consumed <= POLLS, "the node never read every stream to its end"
    return node, sink, built[0]


def assert_batch_definition(sink: MemorySink, streams: Sequence[str]) -> None:
    """The sessions of `streams` are exactly the batch definition's: none lost, none extra."""
    kept = [f for f in FRAGMENTS if stream_name(APP, stream_for_key(f.key, STREAMS)) in streams]
    written = [s.to_dict() for s in sink.sessions if s.stream in streams]
    verdict = verify_sessions(written, expected_sessions(kept, WebSessions()), len(kept))
    assert (verdict.lost, verdict.extra, verdict.conflicting_duplicates) == (0, 0, 0), verdict


def test_records_beside_a_stream_outside_its_log_reach_the_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    consumer = LogConsumer(traffic_log(FRAGMENTS, STREAMS), per_fetch=5)

    def retention(log: LogConsumer, coordinator: LocalCoordinator) -> None:
        if coordinator.polls == 4:  # records of every stream still to come
            log.truncate(BAD, log.positions[BAD] + 10)

    node, sink, coordinator = run_node(monkeypatch, consumer, retention, but=[BAD])
    assert list(coordinator.quarantined) == [BAD]
    assert "outside the stream's log" in coordinator.quarantined[BAD]
    others = [name for name in NAMES if name != BAD]
    assert_batch_definition(sink, others)
    assert set(others) in [set(a) for a in consumer.assigned], "the quarantined one still read"
    assert node.stats.gaps_reseeked == 0, "the records were handed out, not re-read after a gap"


def test_records_beside_a_stream_error_reach_the_engine_and_the_stream_is_re_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    consumer = LogConsumer(traffic_log(FRAGMENTS, STREAMS), per_fetch=5)

    def error(log: LogConsumer, coordinator: LocalCoordinator) -> None:
        if coordinator.polls == 4:  # and the client moved 3 records on past it
            log.fail(BAD, skip=3)

    node, sink, coordinator = run_node(monkeypatch, consumer, error)
    assert not coordinator.quarantined
    assert_batch_definition(sink, NAMES)
    assert node.stats.gaps_reseeked == 0, "re-read at the error, before any gap showed"


def test_a_record_past_the_position_is_refused_and_the_stream_re_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    consumer = LogConsumer(traffic_log(FRAGMENTS, STREAMS), per_fetch=5)
    seen: list[int] = []

    def lose(log: LogConsumer, coordinator: LocalCoordinator) -> None:
        if coordinator.polls == 4:  # records skipped without a word
            seen.append(log.positions[BAD])
            log.lose(BAD, 3)

    node, sink, coordinator = run_node(monkeypatch, consumer, lose)
    assert not coordinator.quarantined
    assert_batch_definition(sink, NAMES)
    assert node.stats.gaps_reseeked == 1
    assert [a.get(BAD) for a in consumer.assigned].count(seen[0]) == 1, "re-sought to its position"
    assert node.stats.totals([])["gaps_reseeked"] == 1, "node_stats and /metrics show it"


def test_a_hole_in_the_log_itself_is_quarantined_after_re_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = traffic_log(FRAGMENTS, STREAMS)
    hole = log[BAD][20:23]
    del log[BAD][20:23]  # as compaction would leave it
    consumer = LogConsumer(log, per_fetch=5)
    node, sink, coordinator = run_node(monkeypatch, consumer, lambda *_: None, but=[BAD])
    assert list(coordinator.quarantined) == [BAD]
    reason = coordinator.quarantined[BAD]
    assert f"offsets {hole[0].offset} to {hole[-1].offset} are missing from the log" in reason
    from framework.node.gaps import GAP_LIMIT  # here: the module is new with this check

    assert node.stats.gaps_reseeked == GAP_LIMIT
    assert_batch_definition(sink, [name for name in NAMES if name != BAD])
    assert all(s.last_offset < hole[0].offset for s in sink.sessions if s.stream == BAD)


@pytest.mark.parametrize("failing_emit", [12, 40, 77])
def test_a_rewind_mid_batch_is_no_gap(failing_emit: int) -> None:
    """Records fetched before a rewind are stale, not skipped ones: nothing refused or lost."""
    log = MemoryLog(traffic_log(FRAGMENTS, STREAMS))
    sink = FlushingSink(fail_emits={failing_emit})
    node = Node(
        node_config(commit_interval=3600.0),  # a rewind goes back further than this batch
        processor=WebSessions(),
        parts=memory_parts(log, sink, VersionedMemory(), log.caught_up),
    )
    node.run()
    assert sink.lost > 0 and node.stats.rewinds > 0
    assert_batch_definition(sink.durable, NAMES)
    assert node.stats.gaps_reseeked == 0
