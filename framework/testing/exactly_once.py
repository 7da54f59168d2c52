"""An in-process transactional Kafka for exactly-once tests, through the client layer's Protocols;
and, for the tests with real servers, whether a topic has a transaction open (`isolation_ends`).

`FakeKafka` keeps, per transactional id, the current producer epoch (bumped by
`init`, which aborts the older producer's open transaction, as a transaction
coordinator does) and, per topic, the committed records only: what a
`read_committed` reader sees. `FakeProducer` is a `TransactionalProducer` whose
commits can be told to fail (abortable, retriable) or to crash the process
(`Crash`, a `BaseException`, after or before the commit landed).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Unpack

from framework.kafka.consumer import assigned_consumer, partition_zero
from framework.kafka.errors import SendFailed
from framework.kafka.producer import SendOptions
from framework.kafka.transactional import ProducerFenced, TransactionAborted, TransactionRetriable
from framework.kernel.config import ConnectionConfig
from framework.node.node import Node
from framework.node.parts import NodeParts
from framework.node.transactions import NodeTransactions
from framework.testkit.inputs import APP
from framework.testkit.memory import LocalCoordinator, MemoryLog, node_config
from sessionizer.examples.weblog import WebSessions
from sessionizer.kafka_sink import KafkaSink
from state.errors import StateError
from state.handover import HandoverStore
from state.log_store import LogStateStore
from state.record import StreamState
from state.store import FencedStateStore, VersionedMemory
from state.writers import MemoryWriters

SESSIONS = f"{APP}.sessions"
DEADLETTER = f"{APP}.deadletter"
STATE = f"{APP}.state"


class Crash(BaseException):  # a process death, not an error to handle
    """The process dies here (kill -9): nothing more runs, nothing is closed."""


@dataclass
class FakeKafka:
    """Transaction coordinators and the committed records of every topic."""

    epochs: Counter[str] = field(default_factory=Counter)
    committed: dict[str, list[tuple[bytes | None, bytes | None]]] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)
    writers: MemoryWriters = field(default_factory=MemoryWriters)
    """The streams' writer records (ZooKeeper's, kept here: shared by every node of a test)."""
    commits = 0
    fail: Callable[[str, int], str | None] = lambda tid, n: None
    """Told per commit (id, the cluster's commit count): None, `abort`, `retry`, `fenced`,
    `crash-before`, `crash-after` (the commit lands, then the process dies) or `lost-ack`
    (a commit carrying output lands but its answer never comes: every later `commit` of it
    times out, and an `abort` returns as if it had aborted, as kafka-python's wrapper did
    when it waited on the pending commit)."""

    def records(self, topic: str) -> list[tuple[bytes | None, bytes | None]]:
        """What a `read_committed` reader of `topic` sees."""
        return self.committed.get(topic, [])


class FakeProducer:
    """A `TransactionalProducer` over `FakeKafka`."""

    def __init__(self, kafka: FakeKafka, transactional_id: str) -> None:
        self.kafka = kafka
        self.transactional_id = transactional_id
        self.epoch = -1
        self.pending: list[tuple[str, bytes | None, bytes | None]] | None = None
        self.closed = False
        self.landed = False
        """A `lost-ack` commit landed; this transaction's end is not known to the caller."""

    @property
    def in_transaction(self) -> bool:
        return self.pending is not None

    def _note(self, what: str) -> None:
        self.kafka.events.append(f"{what} {self.transactional_id}")

    def _check(self) -> None:
        if self.kafka.epochs[self.transactional_id] != self.epoch or self.closed:
            raise ProducerFenced(f"{self.transactional_id}: fenced at epoch {self.epoch}")

    def init(self, timeout: float) -> None:
        self.kafka.epochs[self.transactional_id] += 1  # the older producer's open txn is gone
        self.epoch = self.kafka.epochs[self.transactional_id]
        self._note("init")

    def begin(self) -> None:
        self._check()
        self.pending = []
        self._note("begin")

    def send(
        self, topic: str, key: bytes | None, value: bytes | None, **options: Unpack[SendOptions]
    ) -> None:
        if self.pending is None:
            raise SendFailed("send outside a transaction")
        self._check()
        self.pending.append((topic, key, value))
        self._note(f"send {topic}")

    def commit(self, timeout: float) -> None:
        self._check()
        if self.landed:
            raise TransactionRetriable("commit_transaction: no answer yet")
        assert self.pending is not None
        self.kafka.commits += 1
        fault = self.kafka.fail(self.transactional_id, self.kafka.commits)
        if fault == "crash-before":
            raise Crash(f"before commit {self.kafka.commits}")
        if fault == "retry":
            raise TransactionRetriable("coordinator moved")
        if fault == "abort":
            raise TransactionAborted("a delivery failed")
        if fault == "fenced":
            self.kafka.epochs[self.transactional_id] += 1
            self._check()
        for topic, key, value in self.pending:
            self.kafka.committed.setdefault(topic, []).append((key, value))
        if fault == "lost-ack" and len(self.pending) > 1:  # output beside the state record
            self.landed = True
            self._note("commit")
            raise TransactionRetriable("commit_transaction: timed out")
        self.pending = None
        self._note("commit")
        if fault == "crash-after":
            raise Crash(f"after commit {self.kafka.commits}")

    def abort(self, timeout: float) -> None:
        self._check()
        self.pending = None
        self.landed = False
        self._note("abort")

    def close(self, timeout: float) -> None:
        self.pending = None
        self.closed = True


class FakeStateLog:
    """A `CommittedLog` of the state topic: the newest committed record per key."""

    topic = STATE

    def __init__(self, kafka: FakeKafka) -> None:
        self.kafka = kafka

    def latest(self, key: bytes, timeout: float) -> bytes | None:
        found = None
        for record_key, value in self.kafka.records(STATE):
            if record_key == key:
                found = value
        return found

    def close(self) -> None:
        pass


class NotedHints(FencedStateStore):
    """ZooKeeper's store of hints, noting each hint written in the cluster's events."""

    def __init__(self, memory: VersionedMemory, events: list[str]) -> None:
        super().__init__(memory)
        self.events = events

    def commit_many(self, states: Sequence[StreamState]) -> dict[str, StateError | None]:
        outcomes = super().commit_many(states)
        self.events.extend(f"hint {APP}.{s}" for s, error in outcomes.items() if error is None)
        return outcomes


def exactly_once_parts(
    kafka: FakeKafka,
    log: MemoryLog,
    memory: VersionedMemory,
    stop_when: Callable[[], bool],
    *,
    on_poll: Callable[[LocalCoordinator], None] | None = None,
    coordinators: list[LocalCoordinator] | None = None,
    handover: HandoverStore | None = None,
) -> NodeParts:
    """A node's parts as `framework.node.exactly_once` builds them, over the fakes."""
    transactions = NodeTransactions(
        lambda tid: FakeProducer(kafka, tid),
        app=APP,
        node="node-1",
        state_topic=STATE,
        timeout=0.3,
        writers=kafka.writers,
    )
    store = LogStateStore(
        NotedHints(memory, kafka.events),
        FakeStateLog(kafka),
        before_read=transactions.open,
        prepare=transactions.open_many,
        timeout=1.0,
    )
    sink = KafkaSink(transactions, SESSIONS, DEADLETTER, delivery_timeout=0.3)

    def coordinator(listener: Any) -> LocalCoordinator:
        built = LocalCoordinator(listener, memory, sorted(log.streams), stop_when)
        built.on_poll = on_poll
        if coordinators is not None:
            coordinators.append(built)
        return built

    return NodeParts(log, sink, store, coordinator, handover, transactions)


def run_exactly_once(
    kafka: FakeKafka,
    log: MemoryLog,
    memory: VersionedMemory,
    *,
    until: Callable[[], bool] | None = None,
    on_poll: Callable[[LocalCoordinator], None] | None = None,
    coordinators: list[LocalCoordinator] | None = None,
    handover: HandoverStore | None = None,
    **config: Any,
) -> Node:
    """Run one exactly-once node to the end (or its crash) over the shared fakes."""
    parts = exactly_once_parts(
        kafka,
        log,
        memory,
        until or log.caught_up,
        on_poll=on_poll,
        coordinators=coordinators,
        handover=handover,
    )
    settings = {"delivery": "exactly-once", **config}
    node = Node(node_config(**settings), processor=WebSessions(), parts=parts)
    node.run()
    return node


def session_ids(values: Sequence[tuple[bytes | None, bytes | None]]) -> Counter[bytes]:
    """How often each session key (its id) was committed."""
    return Counter(key for key, _ in values if key is not None)


def isolation_ends(connection: ConnectionConfig, topic: str) -> dict[str, int]:
    """The end of a single-partition topic as each isolation level sees it: `read_committed`
    the last stable offset (where the first open transaction begins), `read_uncommitted` the
    high watermark. Equal: no transaction is open, and a `read_committed` reader sees all."""
    ends = {}
    for level in ("read_committed", "read_uncommitted"):
        reader = assigned_consumer(
            connection.bootstrap, "isolation-ends", connection.kafka_config, isolation_level=level
        )
        try:
            partition = partition_zero(topic)
            ends[level] = int(reader.end_offsets([partition])[partition])
        finally:
            reader.close()
    return ends


def no_open_transaction(connection: ConnectionConfig, topic: str) -> bool:
    """True if no transaction is open on `topic` (a `read_committed` reader reaches its end)."""
    ends = isolation_ends(connection, topic)
    return ends["read_committed"] == ends["read_uncommitted"]
