"""Exactly-once: the checkpoint's transactions, their failure paths, and crashes anywhere.

A real `Node` runs over in-memory parts and an in-process transactional Kafka
(`framework.testing.exactly_once`): what a `read_committed` reader of the sessions topic
sees must be the uninterrupted at-least-once run's sessions, each exactly once.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from framework.kafka.errors import ClientError, SendFailed
from framework.node.errors import NodeCrashed
from framework.node.node import Node
from framework.node.transactions import NodeTransactions
from framework.testing.exactly_once import (
    DEADLETTER,
    SESSIONS,
    STATE,
    Crash,
    FakeKafka,
    FakeProducer,
    FakeStateLog,
    run_exactly_once,
    session_ids,
)
from framework.testkit.memory import (
    FlushingSink,
    LocalCoordinator,
    MemoryLog,
    memory_parts,
    node_config,
    traffic_log,
)
from router.generator import generate_fragments
from sessionizer.examples.weblog import WebSessions
from sessionizer.sinks import encode_session
from state.errors import StateError
from state.handover import HandoverStore, MemoryHandoverLog, MemoryPointers
from state.log_store import LogStateStore
from state.record import StreamState
from state.store import FencedStateStore, VersionedMemory
from state.writers import MemoryWriters

STREAMS = 4
FRAGMENTS = list(generate_fragments(120, seed=7))


def fresh_log() -> MemoryLog:
    return MemoryLog(traffic_log(FRAGMENTS, STREAMS))


@pytest.fixture(scope="module")
def expected() -> tuple[dict[bytes, bytes], int]:
    """The sessions (id → JSON) and dead-letter count of an uninterrupted at-least-once run."""
    sink, log = FlushingSink(), fresh_log()
    parts = memory_parts(log, sink, VersionedMemory(), log.caught_up)
    Node(node_config(), processor=WebSessions(), parts=parts).run()
    sessions = {s.session_id.encode(): encode_session(s) for s in sink.durable.sessions}
    assert len(sessions) == len(sink.durable.sessions) > 20
    return sessions, len(sink.durable.dead_letters)


def assert_exactly_once(kafka: FakeKafka, expected: tuple[dict[bytes, bytes], int]) -> None:
    """The committed sessions are the expected ones, each once; so are the dead letters."""
    sessions, dead_letters = expected
    committed = kafka.records(SESSIONS)
    twice = {key: n for key, n in session_ids(committed).items() if n > 1}
    assert not twice, f"sessions committed more than once: {twice}"
    assert dict(committed) == sessions
    assert len(kafka.records(DEADLETTER)) == dead_letters


def node_ids(kafka: FakeKafka) -> list[str]:
    """The transactional ids of the nodes' producers, in the order they first appear."""
    found = [e.rpartition(" ")[2] for e in kafka.events if e.startswith("init test.node.")]
    return list(dict.fromkeys(found))


def transactions_of(kafka: FakeKafka, tid: str) -> list[list[str]]:
    """One producer's events, cut into transactions (begin .. commit/abort)."""
    found: list[list[str]] = []
    for event in kafka.events:
        what, _, rest = event.rpartition(" ")
        if rest != tid:
            continue
        if what == "begin":
            found.append([])
        if found and what not in ("init", "begin", "hint"):
            found[-1].append(what)
    return found


def test_each_transaction_sends_output_then_the_state_records_then_commits_then_the_hints(
    expected: tuple[dict[bytes, bytes], int],
) -> None:
    kafka, memory = FakeKafka(), VersionedMemory()
    run_exactly_once(kafka, fresh_log(), memory)
    assert_exactly_once(kafka, expected)
    (tid,) = node_ids(kafka)  # one producer for every stream of the node
    txns = transactions_of(kafka, tid)
    assert len(txns) > 1
    for txn in txns:
        *sends, end = txn
        assert end == "commit"
        states = [i for i, what in enumerate(sends) if what == f"send {STATE}"]
        assert states and states == list(range(states[0], len(sends))), txn  # states last
        assert set(sends[: states[0]]) <= {f"send {SESSIONS}", f"send {DEADLETTER}"}
    # One hint per committed state record, each after the commit that carried it.
    committed = Counter(key.decode() for key, _ in kafka.records(STATE) if key is not None)
    hints = Counter(e.removeprefix("hint test.") for e in kafka.events if e.startswith("hint "))
    assert hints == committed
    first_commit = kafka.events.index(f"commit {tid}")
    assert all(i > first_commit for i, e in enumerate(kafka.events) if e.startswith("hint "))


def test_a_planned_stop_clears_every_writer_record_so_the_next_node_fences_nothing(
    expected: tuple[dict[bytes, bytes], int],
) -> None:
    kafka, memory = FakeKafka(), VersionedMemory()
    run_exactly_once(kafka, fresh_log(), memory)
    assert kafka.writers.records == {}
    run_exactly_once(kafka, fresh_log(), memory)
    first, _ = node_ids(kafka)
    assert kafka.events.count(f"init {first}") == 1  # never fenced: it had released
    assert_exactly_once(kafka, expected)


def test_an_aborted_commit_rewinds_its_stream_and_nothing_is_committed_twice(
    expected: tuple[dict[bytes, bytes], int],
) -> None:
    kafka, memory = FakeKafka(), VersionedMemory()
    kafka.fail = lambda tid, n: "abort" if n in (3, 7, 8) else None
    node = run_exactly_once(kafka, fresh_log(), memory)
    assert_exactly_once(kafka, expected)
    assert node.stats.rewinds >= 3
    assert sum(e.startswith("abort ") for e in kafka.events) >= 3


def test_a_retriable_commit_is_retried_and_commits_without_an_abort(
    expected: tuple[dict[bytes, bytes], int],
) -> None:
    kafka, memory = FakeKafka(), VersionedMemory()
    kafka.fail = lambda tid, n: "retry" if n in (2, 3, 9) else None
    node = run_exactly_once(kafka, fresh_log(), memory)
    assert_exactly_once(kafka, expected)
    assert node.stats.rewinds == 0
    assert not any(e.startswith("abort ") for e in kafka.events)


def test_a_commit_still_unanswered_at_the_delivery_timeout_drops_its_stream_for_the_log(
    expected: tuple[dict[bytes, bytes], int],
) -> None:
    # Its outcome is unknown, so no rewind from memory: the next owner reads what committed.
    kafka, memory = FakeKafka(), VersionedMemory()
    kafka.fail = lambda tid, n: "retry" if 2 <= n <= 40 else None  # longer than 0.3 s of retries
    built: list[LocalCoordinator] = []
    log, until = _until_a_drop(built)
    node = run_exactly_once(kafka, log, memory, until=until, coordinators=built)
    assert built[0].fenced, "no stream was dropped: no test"
    assert node.stats.rewinds == 0
    kafka.fail = lambda tid, n: None
    run_exactly_once(kafka, fresh_log(), memory)  # the next owner of every stream
    assert_exactly_once(kafka, expected)


def _until_a_drop(built: list[LocalCoordinator]) -> tuple[MemoryLog, Callable[[], bool]]:
    """A fresh log, and a stop once a stream is dropped (nobody here takes it again) or all
    is read."""
    log = fresh_log()
    return log, lambda: bool(built and built[0].fenced) or log.caught_up()


@pytest.mark.parametrize("at", [2, 5, 9])
def test_a_commit_that_landed_without_an_answer_is_never_rewound_and_repeated(
    expected: tuple[dict[bytes, bytes], int], at: int
) -> None:
    # The commit lands, its answer is lost (a broker restart), and an abort afterwards
    # "succeeds": rewinding then re-sent the committed sessions (26 duplicates seen on
    # real servers with kafka-python). The stream must go to the log's reader instead.
    kafka, memory = FakeKafka(), VersionedMemory()
    kafka.fail = lambda tid, n: "lost-ack" if n >= at else None
    built: list[LocalCoordinator] = []
    log, until = _until_a_drop(built)
    run_exactly_once(kafka, log, memory, until=until, coordinators=built)
    assert sorted(built[0].fenced) == sorted(log.streams)  # the node's transaction had them all
    kafka.fail = lambda tid, n: None
    run_exactly_once(kafka, fresh_log(), memory)  # the next owner of every stream
    assert_exactly_once(kafka, expected)


def test_a_fenced_producer_drops_every_stream_commits_nothing_and_the_next_owner_resumes(
    expected: tuple[dict[bytes, bytes], int],
) -> None:
    kafka, memory = FakeKafka(), VersionedMemory()
    kafka.fail = lambda tid, n: "fenced" if n == 5 else None
    built: list[LocalCoordinator] = []
    log = fresh_log()
    run_exactly_once(kafka, log, memory, coordinators=built)
    assert sorted(built[0].fenced) == sorted(log.streams)
    committed = Counter(key for key, _ in kafka.records(STATE))
    hints = Counter(e.removeprefix("hint test.").encode() for e in kafka.events if "hint " in e)
    assert hints == committed  # nothing was written for the fenced transaction
    kafka.fail = lambda tid, n: None
    run_exactly_once(kafka, fresh_log(), memory)  # the next owner of every stream
    assert_exactly_once(kafka, expected)


def test_a_planned_stop_hands_over_at_the_committed_state_and_the_next_owner_agrees(
    expected: tuple[dict[bytes, bytes], int],
) -> None:
    kafka, memory = FakeKafka(), VersionedMemory()
    store = HandoverStore(MemoryHandoverLog(), MemoryPointers())
    polls = [0]

    def six_polls() -> bool:
        polls[0] += 1
        return polls[0] >= 6

    first = run_exactly_once(kafka, fresh_log(), memory, until=six_polls, handover=store)
    assert first.handover.counts["written"] >= 1, "nothing was open at the stop: no test"
    second = run_exactly_once(kafka, fresh_log(), memory, handover=store)
    # The pointer names the epoch and offset of the state the log holds: every one is used.
    assert second.handover.counts["used"] == first.handover.counts["written"]
    assert_exactly_once(kafka, expected)


def test_streams_lost_while_paused_abort_their_open_transactions_and_say_so(
    expected: tuple[dict[bytes, bytes], int],
) -> None:
    kafka, memory = FakeKafka(), VersionedMemory()
    polls = [0]

    def pause_then_stop(coordinator: LocalCoordinator) -> None:
        polls[0] += 1
        if polls[0] == 8:  # output in open transactions: the interval is long
            coordinator.paused = True

    with capture_logs() as logs:
        run_exactly_once(
            kafka,
            fresh_log(),
            memory,
            until=lambda: polls[0] >= 8,
            on_poll=pause_then_stop,
            commit_interval=60.0,
        )
    aborted = [e for e in logs if e["event"] == "transaction_aborted"]
    assert aborted, "no open transaction was lost: no test"
    assert kafka.records(SESSIONS) == [] and kafka.records(STATE) == []
    run_exactly_once(kafka, fresh_log(), memory)
    assert_exactly_once(kafka, expected)


def node_transactions(
    kafka: FakeKafka, node: str, writers: MemoryWriters, timeout: float = 1.0
) -> NodeTransactions:
    """A node's transactions over the fake cluster, as `framework.node.exactly_once` builds them."""
    return NodeTransactions(
        lambda t: FakeProducer(kafka, t),
        app="a",
        node=node,
        state_topic=STATE,
        timeout=timeout,
        writers=writers,
    )


def test_a_zombie_is_fenced_by_the_new_owners_take_whatever_zookeeper_says() -> None:
    kafka, writers = FakeKafka(), MemoryWriters()
    old, new = node_transactions(kafka, "a", writers), node_transactions(kafka, "b", writers)
    old.open("s")
    old.open("t")
    _send(old, "s", b"v")
    new.open("s")  # fences the id s's writer record names: the zombie's transaction is gone
    outcome = old.commit({"s": b"state", "t": b"state"})
    assert outcome.result == "fenced"
    assert kafka.records(SESSIONS) == [] and kafka.records(STATE) == []
    assert not old.owns("t")  # a fenced producer loses every stream: its node drops them
    assert new.commit({"s": b"state"}).result == "committed"
    assert kafka.records(STATE) == [(b"s", b"state")]
    assert writers.read("s")[0] == new.transactional_id


def test_a_graceful_release_clears_the_writer_record_so_the_taker_fences_nothing() -> None:
    kafka, writers = FakeKafka(), MemoryWriters()
    old, new = node_transactions(kafka, "a", writers), node_transactions(kafka, "b", writers)
    for stream in ("s", "t"):
        old.open(stream)
        _send(old, stream, stream.encode())
    assert old.commit({"s": b"s1", "t": b"t1"}).result == "committed"
    old.release("s")
    assert writers.read("s") == (None, -1)
    new.open("s")
    _send(old, "t", b"t2")  # the releasing node goes on with t
    assert old.commit({"t": b"t2"}).result == "committed"
    assert [v for _, v in kafka.records(SESSIONS)] == [b"s", b"t", b"t2"]
    assert sum(e.startswith("init ") for e in kafka.events) == 2  # one per node, no fence


def test_a_take_of_a_dead_nodes_streams_fences_its_producer_once() -> None:
    kafka, writers = FakeKafka(), MemoryWriters()
    dead, taker = node_transactions(kafka, "a", writers), node_transactions(kafka, "b", writers)
    streams = [f"s{i}" for i in range(6)]
    for stream in streams:
        dead.open(stream)
    with capture_logs() as logs:
        taker.open_many(streams)
        for stream in streams:
            taker.open(stream)
    fences = [e for e in kafka.events if e == f"init {dead.transactional_id}"]
    assert len(fences) == 2  # its own init, then one fence for all six streams
    fenced = [e["fenced"] for e in logs if e["event"] == "writer_fenced"]
    assert fenced == [dead.transactional_id]  # and the log says whom
    assert {writers.read(s)[0] for s in streams} == {taker.transactional_id}


def test_a_stream_with_output_in_the_open_transaction_is_not_taken_again_before_it_ends() -> None:
    kafka, writers = FakeKafka(), MemoryWriters()
    txns = node_transactions(kafka, "a", writers)
    txns.open("s")
    txns.open("t")
    _send(txns, "s", b"v")
    assert txns.retain(["t"]) == {"s"}  # s was dropped with output: never committed
    with pytest.raises(ClientError, match="open transaction"):
        txns.open("s")
    outcome = txns.commit({"t": b"state"})
    assert outcome.result == "aborted" and "['s']" in outcome.error
    txns.open("s")  # the transaction is over: taken again
    assert kafka.records(SESSIONS) == []


def _send(txns: NodeTransactions, stream: str, value: bytes) -> None:
    """One output record of `stream`, as the node's checkpoint hands it on."""
    txns.writing(stream)
    txns.send(SESSIONS, b"k", value, token=_Item(stream))


class _Item:
    def __init__(self, stream: str) -> None:
        self.stream = stream


def test_a_session_a_resize_moved_is_output_of_the_stream_writing_it() -> None:
    """Its record names the stream it began on (not owned here): the writing stream's state
    record commits with it, and an abort rewinds the writing stream."""
    kafka, writers = FakeKafka(), MemoryWriters()
    txns = node_transactions(kafka, "a", writers)
    txns.open("new")
    txns.writing("new")
    txns.send(SESSIONS, b"k", b"moved", token=_Item("old"))  # a FinishedSession of "old"
    assert txns.touched == {"new"} and not txns.in_transaction("old")
    outcome = txns.commit({"old": b"x"})
    assert outcome.result == "aborted" and "['new']" in outcome.error
    txns.writing("new")
    txns.send(SESSIONS, b"k", b"moved", token=_Item("old"))
    assert txns.commit({"new": b"state"}).result == "committed"
    assert kafka.records(SESSIONS) == [(b"k", b"moved")]
    with pytest.raises(SendFailed, match="'old' is not written"):
        txns.writing("old")
        txns.send(SESSIONS, b"k", b"v", token=_Item("old"))


def test_a_take_fences_the_earlier_owner_before_it_reads_the_state() -> None:
    order: list[str] = []
    kafka, memory = FakeKafka(), VersionedMemory()

    class Log(FakeStateLog):
        def latest(self, key: bytes, timeout: float) -> bytes | None:
            order.append("read")
            return super().latest(key, timeout)

    store = LogStateStore(
        FencedStateStore(memory), Log(kafka), before_read=lambda s: order.append("fence"), timeout=1
    )
    store.load("s", memory.take("s"))
    assert order == ["fence", "read"]


def test_the_newest_committed_record_wins_unless_zookeeper_has_a_later_owners() -> None:
    kafka, memory = FakeKafka(), VersionedMemory()
    hints = FencedStateStore(memory)
    epoch = memory.take("s")
    hints.load("s", epoch)
    hints.commit("s", StreamState("s", epoch=epoch, safe_offset=5, committed_offset=5))
    logged = StreamState("s", epoch=epoch, safe_offset=9, committed_offset=9)
    kafka.committed[STATE] = [(b"s", logged.encode())]  # the hint's write was lost in a crash

    def store() -> LogStateStore:
        hints, log = FencedStateStore(memory), FakeStateLog(kafka)
        return LogStateStore(hints, log, before_read=lambda stream: None, timeout=1)

    assert store().load("s", memory.take("s")).committed_offset == 9
    # The lagging hint caught up at the take: `status` (and an idle stream) show the truth.
    assert StreamState.decode(memory.read("s")[0], stream="s").committed_offset == 9
    # `streams reset` writes ZooKeeper at the version it bumps to: a later owner than the log's.
    version = memory.take("s")
    data = StreamState("s", epoch=version + 1, safe_offset=2, committed_offset=2).encode()
    memory.write("s", data, version)
    assert store().load("s", memory.take("s")).committed_offset == 2


def test_a_take_reads_each_zookeeper_hint_once_for_all_its_streams() -> None:
    reads: list[str] = []

    class CountedMemory(VersionedMemory):
        def read(self, stream: str) -> tuple[bytes, int]:
            reads.append(stream)
            return super().read(stream)

    memory = CountedMemory()
    epochs = {stream: memory.take(stream) for stream in ("s", "t")}
    reads.clear()
    store = LogStateStore(
        FencedStateStore(memory), FakeStateLog(FakeKafka()), before_read=lambda s: None, timeout=1
    )
    store.prepare(list(epochs))
    for stream, epoch in epochs.items():
        assert store.load(stream, epoch) == StreamState.initial(stream, epoch)
    assert reads == ["s", "t"], "one read of each hint: the one `prepare` made"


def test_a_failed_init_fails_the_take_as_an_unreadable_state() -> None:
    memory = VersionedMemory()

    def refuse(stream: str) -> None:
        raise ClientError("init_transactions timed out")

    store = LogStateStore(
        FencedStateStore(memory), FakeStateLog(FakeKafka()), before_read=refuse, timeout=1
    )
    with pytest.raises(StateError, match="init_transactions"):
        store.load("s", memory.take("s"))
    assert store.version("s") is None


CrashPlan = tuple[str, int]


def crash_plans() -> st.SearchStrategy[CrashPlan]:
    """Where the first node dies: at a poll, or at a commit (before or after it lands)."""
    return st.tuples(st.sampled_from(["poll", "crash-before", "crash-after"]), st.integers(1, 60))


@settings(max_examples=20, deadline=None)
@given(plans=st.lists(crash_plans(), min_size=1, max_size=3))
def test_crashes_anywhere_leave_every_session_committed_exactly_once(
    plans: list[CrashPlan], expected: tuple[dict[bytes, bytes], int]
) -> None:
    kafka, memory = FakeKafka(), VersionedMemory()
    for where, at in plans:  # each node dies somewhere; the next takes every stream over
        kafka.fail = _commit_fault(where, kafka.commits + at)
        with contextlib.suppress(Crash, NodeCrashed):
            run_exactly_once(kafka, fresh_log(), memory, on_poll=_die_at_poll(where, at))
    kafka.fail = lambda tid, n: None
    run_exactly_once(kafka, fresh_log(), memory)
    assert_exactly_once(kafka, expected)


def _die_at_poll(where: str, at: int) -> Callable[[LocalCoordinator], None]:
    polls = [0]

    def poll(_: LocalCoordinator) -> None:
        polls[0] += 1
        if where == "poll" and polls[0] == at:
            raise Crash(f"poll {at}")

    return poll


def _commit_fault(where: str, at: int) -> Callable[[str, int], str | None]:
    if where == "poll":
        return lambda tid, n: None
    return lambda tid, n: where if n == at else None


def test_a_broken_producer_is_closed_at_once_and_replaced_by_the_next_generation() -> None:
    # Closing with a 5 s abort on the node's loop held a node's reading up for tens of
    # seconds after a broker restart.
    kafka, closed, writers = FakeKafka(), [], MemoryWriters()

    class Noted(FakeProducer):
        def close(self, timeout: float) -> None:
            closed.append((self.transactional_id, timeout))
            super().close(timeout)

    txns = NodeTransactions(
        lambda t: Noted(kafka, t),
        app="a",
        node="n",
        state_topic=STATE,
        timeout=0.2,
        writers=writers,
    )
    for stream in ("s", "t"):
        txns.open(stream)
        _send(txns, stream, b"v")
    first = txns.transactional_id
    kafka.fail = lambda tid, n: "retry"
    outcome = txns.commit({"s": b"state", "t": b"state"})
    assert outcome.result == "broken"
    assert closed == [(first, 0.0)]
    assert not txns.owns("s") and not txns.owns("t")
    kafka.fail = lambda tid, n: None
    txns.open("s")  # the next generation fences the broken one, whose end is unknown
    assert txns.transactional_id != first
    assert f"init {first}" in kafka.events[kafka.events.index(f"init {txns.transactional_id}") :]
