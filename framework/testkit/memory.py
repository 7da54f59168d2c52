"""A real `Node` in-process: its four parts in memory, no ZooKeeper, no Kafka, no threads.

As Kafka Streams users drive a real task with `TopologyTestDriver`, these drive
the node's own loop (`framework.node.node.Node`: poll, hand to tasks, deliver,
checkpoint) over parts you can inspect and break (docs/testing.md):

- `MemoryLog`: a `RecordSource` over in-memory streams of `StreamRecord`s
  (`traffic_log` routes fragments to them as the producer does);
- `FlushingSink`: a sink that keeps what a flush confirmed (`durable`) apart from
  what is still in flight, and fails chosen flushes or emits (the in-flight output
  is lost, as a producer's is);
- `LocalCoordinator`: hands the node every stream at its first poll, through a
  shared `state.store.VersionedMemory` (so epochs fence like ZooKeeper's
  versions), and stops the node when the caller's condition holds;
- the store is the product's own `state.store.FencedStateStore` over that memory.

`memory_parts` puts the four together for `Node(node_config(), processor=...,
parts=...)`; `delivered` and `letters` read what the sinks confirmed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from balancer.config import BalancerListener
from balancer.fencing import StreamLease
from balancer.machine import BalancerState
from framework.kernel.config import ConnectionConfig
from framework.kernel.records import StreamRecord
from framework.kernel.watermark import Watermark
from framework.node.config import NodeConfig
from framework.node.parts import NodeParts
from framework.node.ports import Fetched
from framework.testkit.inputs import APP
from router.fragment import ParsedFragment
from router.hashing import stream_for_key
from router.naming import stream_name
from router.wire import encode_fragment, encode_watermark
from sessionizer.errors import SinkError
from sessionizer.records import FinishedSession
from sessionizer.sinks import MemorySink
from state.store import FencedStateStore, VersionedMemory

__all__ = [
    "FlushingSink",
    "LocalCoordinator",
    "MemoryLog",
    "delivered",
    "letters",
    "memory_parts",
    "node_config",
    "traffic_log",
]


class MemoryLog:
    """A `RecordSource` over in-memory streams; `poll` hands out a few records per stream."""

    def __init__(self, streams: Mapping[str, list[StreamRecord]], per_poll: int = 7) -> None:
        self.streams = {name: list(records) for name, records in streams.items()}
        self.per_poll = per_poll
        self.positions: dict[str, int] = {}
        self.start: dict[str, int] = dict.fromkeys(self.streams, 0)

    def assign(self, positions: Mapping[str, int]) -> None:
        """Read these streams from these offsets."""
        self.positions = dict(positions)

    def poll(self, timeout: float, max_records: int) -> Fetched:
        """Up to `per_poll` records of every assigned stream; those outside their log beside."""
        batches, outside = {}, {}
        for stream, position in self.positions.items():
            if not self.start[stream] <= position <= len(self.streams[stream]):
                outside[stream] = position
                continue
            records = self.streams[stream][position : position + self.per_poll]
            if records:
                batches[stream] = records
                self.positions[stream] = position + len(records)
        return Fetched(batches, outside)

    def bounds(self, streams: Sequence[str]) -> dict[str, tuple[int, int]]:
        """(start, end) of each stream."""
        return {s: (self.start[s], len(self.streams[s])) for s in streams}

    def ends(self, streams: Sequence[str]) -> dict[str, int]:
        """The end of each assigned stream (what a consumer's fetches would have seen)."""
        return {s: len(self.streams[s]) for s in streams if s in self.positions}

    def caught_up(self) -> bool:
        """Every assigned stream has been read to its end."""
        return all(p == len(self.streams[s]) for s, p in self.positions.items())

    def close(self) -> None:
        """Nothing to release."""


class FlushingSink(MemorySink):
    """Confirms output at `flush`; `fail_flushes`/`fail_emits` make chosen calls fail.

    Flushes are counted only when output is in flight, so a failure always loses some.
    """

    def __init__(
        self,
        *,
        fail_flushes: Iterable[int] = (),
        fail_emits: Iterable[int] = (),
        raise_on_emit: Callable[[], BaseException] | None = None,
        durable: MemorySink | None = None,
    ) -> None:
        super().__init__()
        self.durable = durable if durable is not None else MemorySink()
        self.fail_flushes = set(fail_flushes)
        self.fail_emits = set(fail_emits)
        self.raise_on_emit = raise_on_emit
        self.flushes = self.emits = self.lost = 0

    def emit(self, session: FinishedSession) -> None:
        """Accept a session into flight, or fail as told."""
        self.emits += 1
        if self.emits in self.fail_emits:
            failure = self.raise_on_emit() if self.raise_on_emit else SinkError("send timed out")
            self._lose()
            raise failure
        super().emit(session)

    def flush(self) -> None:
        """Confirm what is in flight, or lose it and raise `SinkError`."""
        if not (self.sessions or self.dead_letters):
            return
        self.flushes += 1
        if self.flushes in self.fail_flushes:
            self._lose()
            raise SinkError(f"flush {self.flushes} failed (told to)")
        self.durable.sessions.extend(self.sessions)
        self.durable.dead_letters.extend(self.dead_letters)
        self.sessions.clear()
        self.dead_letters.clear()

    def _lose(self) -> None:
        self.lost += len(self.sessions) + len(self.dead_letters)
        self.sessions.clear()
        self.dead_letters.clear()


class LocalCoordinator:
    """Assigns every stream of the log to its node at the first poll; closes by revoking."""

    def __init__(
        self,
        listener: BalancerListener,
        memory: VersionedMemory,
        streams: Sequence[str],
        stop_when: Callable[[], bool],
    ) -> None:
        self.listener = listener
        self.memory = memory
        self.streams = list(streams)
        self.stop_when = stop_when
        self.held: set[str] = set()
        self.quarantined: dict[str, str] = {}
        self.fenced: list[str] = []
        self.paused = False
        self.state = BalancerState.STOPPED
        self.polls = 0
        self.on_poll: Callable[[LocalCoordinator], None] | None = None
        self.load_reports: list[tuple[dict[str, int], float]] = []

    @property
    def connected(self) -> bool:
        """Connected unless paused (a paused coordinator is a ZooKeeper outage)."""
        return not self.paused

    def start(self) -> None:
        """Start joining."""
        self.state = BalancerState.JOINING

    def poll(self, timeout: float = 0.0) -> BalancerState:
        """Assign at the first poll; stop the node once `stop_when` holds."""
        self.polls += 1
        if self.state is BalancerState.JOINING:
            self.state = BalancerState.STABLE
            leases = [StreamLease(s, self.memory.take(s)) for s in self.streams]
            self.held.update(self.streams)
            self.listener.on_assigned(leases)
        if self.on_poll is not None:
            self.on_poll(self)
        if self.stop_when():
            self.listener.stop()  # type: ignore[attr-defined]
        return self.state

    def drain(self, seconds: float) -> None:
        """Release everything at once."""
        self.listener.on_revoked(sorted(self.held))
        self.held.clear()
        self.state = BalancerState.DRAINED

    def close(self) -> None:
        """Revoke what is held (the node commits), unless paused."""
        if self.held:
            if self.paused:
                self.listener.on_lost(sorted(self.held))
            else:
                self.listener.on_revoked(sorted(self.held))
        self.held.clear()
        self.state = BalancerState.CLOSED

    def report_fenced(self, stream: str) -> None:
        """Forget a fenced stream."""
        self.fenced.append(stream)
        self.held.discard(stream)

    def quarantine(self, stream: str, reason: str) -> None:
        """Remember the quarantine."""
        self.quarantined[stream] = reason
        self.held.discard(stream)

    def report_load(self, fragments: Mapping[str, int], busy_seconds: float) -> None:
        """Remember what the node reported."""
        self.load_reports.append((dict(fragments), busy_seconds))


def traffic_log(
    fragments: Sequence[ParsedFragment], streams: int, *, end: bool = True
) -> dict[str, list[StreamRecord]]:
    """Route fragments to streams as the producer does, with an end-of-input watermark."""
    log: dict[str, list[StreamRecord]] = {stream_name(APP, i): [] for i in range(streams)}
    for fragment in fragments:
        topic = stream_name(APP, stream_for_key(fragment.key, streams))
        key, value = encode_fragment(fragment)
        record = StreamRecord(topic, len(log[topic]), key, value, fragment.timestamp_ms, [])
        log[topic].append(record)
    if end:
        last = max(f.timestamp_ms for f in fragments)
        value, headers = encode_watermark(Watermark(last, end=True))
        for topic, records in log.items():
            records.append(StreamRecord(topic, len(records), None, value, last, headers))
    return log


def node_config(**overrides: Any) -> NodeConfig:
    """A node config for in-memory parts: no servers are ever contacted (`overrides` win)."""
    settings: dict[str, Any] = {
        "connection": ConnectionConfig("fake-zk:1", "fake-kafka:1", APP),
        "node_id": "n1",
        "commit_interval": 1e-9,  # commit at every step: the most interleavings
        "session_timeout": 0.2,
        "poll_timeout": 0.001,
        "stats_interval": 3600.0,
    }
    settings.update(overrides)
    return NodeConfig(**settings)


def memory_parts(
    log: MemoryLog,
    sink: MemorySink,
    memory: VersionedMemory,
    stop_when: Callable[[], bool],
    coordinators: list[LocalCoordinator] | None = None,
    *,
    on_poll: Callable[[LocalCoordinator], None] | None = None,
    store: FencedStateStore | None = None,
) -> NodeParts:
    """The four parts over shared in-memory state; `coordinators` collects what is built."""

    def coordinator(listener: BalancerListener) -> LocalCoordinator:
        built = LocalCoordinator(listener, memory, sorted(log.streams), stop_when)
        built.on_poll = on_poll
        if coordinators is not None:
            coordinators.append(built)
        return built

    return NodeParts(log, sink, store or FencedStateStore(memory), coordinator)


def delivered(sinks: Iterable[MemorySink]) -> tuple[dict[str, FinishedSession], list[str]]:
    """Sessions by id over every sink's durable output, and ids delivered with other content."""
    sessions: dict[str, FinishedSession] = {}
    differing = []
    for sink in sinks:
        for session in sink.sessions:
            seen = sessions.setdefault(session.session_id, session)
            if seen != session:
                differing.append(session.session_id)
    return sessions, differing


def letters(sinks: Iterable[MemorySink]) -> set[tuple[str, int, str]]:
    """(stream, offset, reason) of every dead letter delivered."""
    return {(d.stream, d.offset, d.reason) for s in sinks for d in s.dead_letters}
