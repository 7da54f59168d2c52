"""A live resize in-process: producers, stream owners, a registry, crashes and handovers.

`ResizeWorld` runs the protocol of docs/resize.md with the product's own parts: each
stream's owner is a `StreamTask` (its engine and `ResizeGate`), whose state is
committed as the node commits it (encoded `StreamState` bytes, resumed by a fresh
task from its safe offset), whose output is *in flight* until a flush (sessions to a
durable list, `Outgoing` records appended to their stream's log), and whose planned
moves go through the handover codec (`sessionizer.handover`). Producers are
simulated: they write `joined` markers, fragments routed by their count, `resize`
markers when they switch, and their end of input. Every choice comes from a
`choose(lo, hi)` function, so a hypothesis strategy can drive it
(`lambda lo, hi: data.draw(st.integers(lo, hi))`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from framework.kernel.records import StreamRecord
from framework.kernel.watermark import JOINED, Marker, Watermark
from framework.node.resize import Outgoing, StreamResize
from framework.node.task import StreamTask
from framework.testkit.inputs import APP
from router.fragment import ParsedFragment
from router.hashing import stream_for_key
from router.naming import stream_name
from router.resize_wire import Epoch, ResizeMarker, encode_control
from router.wire import encode_fragment, encode_watermark
from sessionizer.handover import HandoverUnavailable, export_engine, restore_engine
from sessionizer.processor import StreamProcessor
from sessionizer.records import FinishedSession
from sessionizer.sinks import DeadLetter
from state.record import StreamState

__all__ = ["Owner", "ResizeWorld", "SimProducer"]

Choose = Callable[[int, int], int]


@dataclass
class SimProducer:
    """A named producer (None: anonymous, never sees the resize) routing by `count`."""

    producer_id: str | None
    count: int
    sees_resize: bool = True
    switched: bool = False
    clock: int = 0


@dataclass
class Owner:
    """One stream's owner: its task, its last stored state, its output in flight."""

    stream: str
    task: StreamTask
    stored: bytes = b""
    sessions: list[FinishedSession] = field(default_factory=list)
    letters: list[DeadLetter] = field(default_factory=list)
    outgoing: list[Outgoing] = field(default_factory=list)


class ResizeWorld:
    """The logs, owners, producers and registry of one app during a resize."""

    def __init__(
        self, make_processor: Callable[[], StreamProcessor[Any]], old: int, producers: int
    ) -> None:
        self.make_processor = make_processor
        self.count = old
        self.logs: dict[str, list[StreamRecord]] = {stream_name(APP, i): [] for i in range(old)}
        self.owners: dict[str, Owner] = {}
        self.registry: dict[str, StreamResize] = {}
        self.epoch: Epoch | None = None
        self.sessions: list[FinishedSession] = []
        self.letters: list[DeadLetter] = []
        self.sent: list[tuple[ParsedFragment, str, int]] = []
        """Every fragment sent, with the stream and offset it was written to."""
        self.handovers = self.crashes = 0
        ids = [f"p{i}" for i in range(producers)]
        self.producers = [SimProducer(pid, old) for pid in ids]
        for producer in self.producers:
            self.join(producer)

    # -- producers and the command ------------------------------------------------------

    def join(self, producer: SimProducer, streams: Sequence[int] | None = None) -> None:
        """Write `producer`'s `joined` marker to its streams."""
        if producer.producer_id is None:
            return
        for index in range(producer.count) if streams is None else streams:
            self._watermark(index, producer.clock, producer.producer_id, JOINED)

    def send(self, producer: SimProducer, fragment: ParsedFragment) -> None:
        """Route and write one fragment, as `StreamProducer.send` does."""
        index = stream_for_key(fragment.key, producer.count)
        key, value = encode_fragment(fragment)
        stream = stream_name(APP, index)
        offset = self._append(stream, key, value, fragment.timestamp_ms, [])
        producer.clock = max(producer.clock, fragment.timestamp_ms)
        self.sent.append((fragment, stream, offset))

    def resize(self, new: int) -> None:
        """The command: start markers to every stream, then the count in the registry."""
        assert self.epoch is None
        epoch = self.epoch = Epoch(1, self.count, new)
        for index in range(max(self.count, new)):
            self.logs.setdefault(stream_name(APP, index), [])
            self._control(index, ResizeMarker(epoch, None, 0))

    def switch(self, producer: SimProducer) -> None:
        """A producer sees the resize: `resize` markers to the old streams, then routes by M."""
        epoch = self.epoch
        assert epoch is not None and producer.producer_id is not None
        for index in range(epoch.old):
            self._control(index, ResizeMarker(epoch, producer.producer_id, producer.clock))
        producer.count, producer.switched = epoch.new, True
        self.join(producer, range(epoch.old, epoch.new))

    def end(self, producer: SimProducer) -> None:
        """End of input on every stream the producer routes to."""
        clock = producer.clock
        for index in range(producer.count):
            self._watermark(index, clock, producer.producer_id, None, end=True)

    # -- owners -------------------------------------------------------------------------

    def owner(self, stream: str) -> Owner:
        """The stream's owner, resumed from its stored state when it has none."""
        owner = self.owners.get(stream)
        if owner is None:
            owner = self.owners[stream] = self._resume(stream, b"")
        return owner

    def step(self, stream: str) -> bool:
        """The owner reads its next record; False when it is at the end of the log."""
        owner = self.owner(stream)
        task = owner.task
        log = self.logs[stream]
        if task.position >= len(log):
            return False
        for out in task.handle(log[task.position]):
            if isinstance(out, FinishedSession):
                owner.sessions.append(out)
            else:
                owner.letters.append(out)
        self._collect(owner)
        return True

    def record_start(self, stream: str) -> None:
        """The node writes what the gate asks into the registry, and says so."""
        gate = self.owner(stream).task.gate
        wanted = gate.wants_start if gate is not None else None
        if wanted is not None and gate is not None:
            self.registry[stream] = wanted
            gate.start_recorded(wanted)

    def flush(self, stream: str) -> None:
        """Everything in flight is acknowledged: sessions out, records into their logs."""
        owner = self.owner(stream)
        self.sessions += owner.sessions
        self.letters += owner.letters
        for record in owner.outgoing:
            self._append(
                record.topic, record.key, record.value, record.timestamp_ms, record.headers
            )
        owner.sessions, owner.letters, owner.outgoing = [], [], []

    def commit(self, stream: str) -> None:
        """Flush, then store the state (the checkpoint's order); as the node, never while the
        owner still replays what the last one had read (it would move the state backwards)."""
        self.flush(stream)
        owner = self.owner(stream)
        if owner.task.replaying:
            return
        state = owner.task.snapshot()
        owner.stored = state.encode()
        owner.task.committed_as(state)
        self._collect(owner)

    def crash(self, stream: str, *, flushed: bool) -> None:
        """Kill the owner (after a flush, or losing what is in flight); a new one resumes."""
        if flushed:
            self.flush(stream)
        stored = self.owner(stream).stored
        self.owners[stream] = self._resume(stream, stored)
        self.crashes += 1

    def hand_over(self, stream: str) -> None:
        """A planned move: commit, then the next owner restores the engine or replays (as
        after a replaying owner, which the node never hands over)."""
        self.commit(stream)
        owner = self.owner(stream)
        if owner.task.replaying:
            self.owners[stream] = self._resume(stream, owner.stored)
            return
        state = StreamState.decode(owner.stored, stream=stream)
        processor = self.make_processor()
        try:
            engine = restore_engine(processor, state, export_engine(owner.task.engine))
        except HandoverUnavailable:
            self.owners[stream] = self._resume(stream, owner.stored)
            return
        task = StreamTask(stream, engine, position=state.committed_offset, committed=state)
        task.know_resize(self.registry.get(stream))
        task.outgoing = []
        self.owners[stream] = Owner(stream, task, owner.stored)
        self.handovers += 1

    def settle(self, choose: Choose, *, rounds: int = 10_000) -> None:
        """Run every owner to the end of its log, recording and committing, until quiet."""
        for _ in range(rounds):
            moved = False
            for stream in sorted(self.logs):
                while self.step(stream):
                    moved = True
                self.record_start(stream)
                if self.owner(stream).outgoing or choose(0, 1):
                    self.commit(stream)
                else:
                    self.flush(stream)
            if not moved and not any(o.outgoing for o in self.owners.values()):
                for stream in sorted(self.logs):
                    self.commit(stream)
                if all(self.owner(s).task.position >= len(self.logs[s]) for s in self.logs):
                    return
        raise AssertionError("the world did not settle")

    def unsettled(self) -> list[str]:
        """The streams whose gate still holds its epoch's start (none once all is done)."""
        owners = self.owners.values()
        return sorted(o.stream for o in owners if o.task.gate and o.task.gate.holding is not None)

    # -- inside -------------------------------------------------------------------------

    def _resume(self, stream: str, stored: bytes) -> Owner:
        state = StreamState.decode(stored, stream=stream)
        task = StreamTask.resume(self.make_processor(), state, self.registry.get(stream))
        task.outgoing = []
        return Owner(stream, task, stored)

    def _collect(self, owner: Owner) -> None:
        outgoing = owner.task.outgoing
        if outgoing:
            owner.outgoing += outgoing
            outgoing.clear()

    def _append(
        self,
        stream: str,
        key: bytes | None,
        value: bytes,
        timestamp: int,
        headers: Sequence[tuple[str, bytes]],
    ) -> int:
        log = self.logs.setdefault(stream, [])
        log.append(StreamRecord(stream, len(log), key, value, timestamp, list(headers)))
        return len(log) - 1

    def _watermark(
        self,
        index: int,
        clock: int,
        producer: str | None,
        marker: Marker | None,
        *,
        end: bool = False,
    ) -> None:
        value, headers = encode_watermark(Watermark(clock, end, None, producer, marker))
        self._append(stream_name(APP, index), None, value, clock, headers)

    def _control(self, index: int, record: ResizeMarker) -> None:
        key, value, headers, stamp = encode_control(record)
        self._append(stream_name(APP, index), key, value, stamp, headers)
