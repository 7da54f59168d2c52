"""`ResizeGate`: one stream's part in a live resize, between its task and its engine.

docs/resize.md is the protocol.  A stream's task makes a gate when it reads the first
record of a resize (any of `router.resize_wire`'s kinds), or when it resumes a stream
whose registry entry (`resize/<stream>`, a `StreamResize`) says the resize is behind
its safe offset.  The gate

- decodes nothing itself: the task hands it each resize record (`control`) and each
  watermark before the engine applies it (`watermark`);
- is the engine's `KeyGate` while it matters: a source forwards its moved keys'
  fragments after its barrier, a target holds them back until their source's done
  marker, and names migrated sessions by their source (`admit`, `identify`);
- holds the engine's safe offset at the epoch's first record until the stream has
  passed its barrier (a source) or settled (a target), *and* the node has recorded
  that offset in the registry (`wants_start`, `start_recorded`): a replay from
  before it meets the whole epoch again; a task resumed past it knows the epoch is
  behind it;
- queues what the stream writes elsewhere as `Outgoing` records, and what restoring,
  placing or closing sessions finished, for the task (`take`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

import structlog

from framework.kernel.fragment import Fragment
from framework.kernel.watermark import JOINED, LEFT, Watermark
from framework.node.resize_source import SourceRole
from framework.node.resize_target import ForwardFilter, TargetRole
from router.naming import stream_index, stream_name
from router.resize_wire import (
    Control,
    Epoch,
    Forward,
    ForwardEnd,
    ForwardSeal,
    MigrationDone,
    MigrationPart,
    ResizeMarker,
    encode_control,
)
from sessionizer.engine import SessionEngine
from sessionizer.migration import PLACE, Admission, Origin
from sessionizer.records import EngineOutput
from sessionizer.segment import Segment

__all__ = ["Outgoing", "ResizeGate", "StreamResize", "app_of"]

_log = structlog.get_logger("sessionizer.resize")


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A record this stream's owner writes to another stream (through the node's sink)."""

    topic: str
    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]]
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class StreamResize:
    """The registry's `resize/<stream>`: the epoch, the offset of its first record here, and
    a source's barrier (None for a target)."""

    epoch: Epoch
    start: int
    barrier: int | None = None


GateOutput: TypeAlias = Outgoing | EngineOutput


def app_of(stream: str) -> str:
    """The app of a stream topic name (`<app>.stream.<NNNN>`)."""
    stream_index(stream)
    return stream.rsplit(".stream.", 1)[0]


class ResizeGate:
    """The resize decisions of one stream (see the module docstring)."""

    def __init__(
        self,
        stream: str,
        engine: SessionEngine,
        *,
        resumed_from: int,
        recorded: StreamResize | None = None,
        behind: bool = False,
    ) -> None:
        self.stream, self.app = stream, app_of(stream)
        self.index = stream_index(stream)
        self._engine = engine
        self._resumed_from = resumed_from
        self._recorded = recorded
        self.epoch: Epoch | None = None
        self.start: int | None = None
        self.source: SourceRole | None = None
        self.target: TargetRole | None = None
        self.forwards = ForwardFilter()
        self.duplicates = 0
        self.reading = resumed_from
        """The offset of the record the stream's task is reading (it says so first)."""
        self._holding: int | None = None
        self._forward_holds: set[int] = set()
        self._out: list[GateOutput] = []
        if recorded is not None and behind:
            self._open(recorded.epoch, None, recorded.barrier)

    # -- the registry -------------------------------------------------------------------

    @property
    def wants_start(self) -> StreamResize | None:
        """What the node must record before the safe offset may pass the epoch's start: the
        start, and a source's barrier once it is behind."""
        if self.epoch is None or self.start is None or self._is_recorded():
            return None
        source = self.source
        if source is not None and source.barrier is None:
            return None  # recorded with the barrier, once there is one
        return StreamResize(self.epoch, self.start, None if source is None else source.barrier)

    def start_recorded(self, recorded: StreamResize) -> None:
        """The registry holds `recorded` (the node wrote or read it)."""
        self._recorded = recorded
        self._release()

    @property
    def holding(self) -> int | None:
        """The epoch's start while the gate holds the safe offset there, else None."""
        return self._holding

    def progress(self) -> dict[str, Any]:
        """This stream's part, for the registry's `resize/<stream>` and `status`."""
        info: dict[str, Any] = {"epoch": None if self.epoch is None else self.epoch.epoch}
        info["start"] = self.start
        if self.source is not None:
            counts = self.source.counts
            info.update(role="source", barrier=self.source.barrier, sessions=counts.sessions)
            info.update(fragments=counts.fragments, forwarded=counts.forwarded)
        if self.target is not None:
            info.update(role="target", settled=self.target.settled, held=self.target.waiting)
            info.update(sessions=self.target.counts.sessions, late=self.target.counts.late)
            info.update(held_total=self.target.counts.held)
        return info

    # -- records ------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """Output is waiting, or the target may have settled (`take` after each record)."""
        return bool(self._out) or (self.target is not None and self.target.due)

    def take(self) -> list[GateOutput]:
        """What the gate produced since the last call (settling first, if it may)."""
        self._settle()
        out, self._out = self._out, []
        return out

    def control(self, record: Control) -> Fragment | Watermark | None:
        """A resize record at its offset; returns a forwarded fragment (or end of input) the
        engine must process at that offset (else the task steps past the record)."""
        assert record.offset is not None
        if not self._current(record):
            self.duplicates += 1
            return None
        fragment: Fragment | Watermark | None = None
        if isinstance(record, ResizeMarker):
            if self.source is not None:
                self.source.marker(record.producer)
        elif isinstance(record, MigrationPart):
            if self.target is not None:
                self.target.part(record, self._engine.stream_time_ms)
        elif isinstance(record, MigrationDone):
            # A record parked as dated too far ahead is confirmed first, as at a producer's
            # marker (its key's fragment is then held, while the source is not done): its
            # verdict would place it among the restored sessions, which lie past its offset.
            # At every done marker, as a replay that resumes past the start (where they are
            # all stale) meets them.
            self._confirm_parked()
            if self.target is not None:
                self._out += self.target.done_marker(record)
        elif isinstance(record, Forward | ForwardEnd):
            fragment = self._forward(record)
        elif isinstance(record, ForwardSeal):
            self._unhold(self.forwards.seal(record.source, record.committed))
        self._barrier(record.offset, self._live())
        self._settle()
        return fragment

    def watermark(self, watermark: Watermark) -> None:
        """A watermark, before the engine applies it: a producer that stops being live may
        complete the barrier, and an end of input reaches held keys when they arrive."""
        offset, producer, marker = watermark.offset, watermark.producer, watermark.marker
        if offset is None or not (watermark.end or marker):
            return  # a plain watermark changes no producer's liveness
        # The engine's verdict on a parked record first, as processing the watermark gives it:
        # what the verdict forwards must precede the end of input forwarded below.
        self._out += self._engine.judge_parked_by(watermark)
        live = self._live()
        was_live = producer is not None and producer in live
        ends = False
        if marker == JOINED and producer is not None:
            live = live | {producer}
            if self.target is not None:
                self.target.ended = False
        elif was_live:
            if marker == LEFT or watermark.end:
                live = live - {producer}
                ends = not live and marker != LEFT
        else:
            ends = marker != LEFT and watermark.end and not live
        if ends and self.target is not None:
            self.target.ended = True
        if watermark.end and not was_live and self.source is not None:
            self.source.forward_end(offset, watermark.timestamp_ms)
        self._barrier(offset, live, ended=ends)

    def committed(self, offset: int) -> None:
        """A commit stored the stream up to `offset` (forward seals follow)."""
        if self.source is not None and self.source.passed:
            parked = self._engine.parked_offset
            # A parked record is forwarded, if at all, at its verdict: after this commit, so
            # a successor may forward it again.
            repeatable = offset if parked is None else min(offset, parked)
            self.source.committed_at(repeatable, self._engine.stream_time_ms)

    # -- KeyGate ------------------------------------------------------------------------

    def admit(self, fragment: Fragment, event_time: int, before: int | None) -> Admission:
        """Forward (a source past its barrier), hold back (a target), or place."""
        if self.source is not None:
            return self.source.admit(fragment, self.reading)
        if self.target is not None:
            return self.target.admit(fragment, event_time, before)
        return PLACE

    def identify(self, key: str, segment: Segment) -> Origin | None:
        """A migrated session's origin (a target's)."""
        return self.target.identify(key, segment) if self.target is not None else None

    def keeps(self, key: str) -> bool:
        """A source keeps its moving keys' sessions open and raw until its barrier."""
        return self.source is not None and self.source.keeps(key)

    # -- inside -------------------------------------------------------------------------

    def _current(self, record: Control) -> bool:
        """Open the record's epoch if it is new here; False for a record of an older one."""
        if self.epoch is None or record.epoch.epoch > self.epoch.epoch:
            if self.epoch is not None and self._holding is not None:
                _log.error(
                    "resize_overlap",
                    stream=self.stream,
                    epoch=record.epoch.epoch,
                    note="a resize started before the previous one settled here; "
                    "the previous one's guarantees end at this record",
                )
                self._engine.release(self._holding)
                self._holding = None
            assert record.offset is not None
            self._open(record.epoch, record.offset)
            return True
        return record.epoch.epoch == self.epoch.epoch

    def _open(self, epoch: Epoch, offset: int | None, barrier: int | None = None) -> None:
        """Take part in `epoch`, from `offset` (None: it is behind this owner's safe offset,
        and so is a source's `barrier`)."""
        self.epoch, self.start = epoch, offset
        behind = offset is None
        self.source = self.target = None
        if epoch.is_source(self.index):
            self.source = SourceRole(
                self.stream,
                self.app,
                epoch,
                self._engine,
                self._emit,
                passed=barrier if behind else None,
                resumed_from=self._resumed_from,
                start_time=self._engine.stream_time_ms,
            )
            if behind:
                self.source.seal_all()
        elif epoch.is_target(self.index):
            self.target = TargetRole(self.stream, self.app, epoch, self._engine, settled=behind)
        if offset is not None:
            # A record parked as dated too far ahead is confirmed, as at a producer's marker: a
            # replay from the hold below would not meet it again.
            self._confirm_parked()
            self._engine.hold(offset)
            self._holding = offset
            _log.info("resize_started", stream=self.stream, epoch=epoch.epoch, offset=offset)
        busy = self.source is not None or (self.target is not None and not behind)
        self._engine.attach(self if busy else None)

    def _confirm_parked(self) -> None:
        if self._engine.parked_offset is not None:
            self._out += self._engine.confirm_parked()

    def _live(self) -> frozenset[str]:
        return self._engine.live_producers()

    def _barrier(self, offset: int, live: frozenset[str], *, ended: bool = False) -> None:
        source = self.source
        if source is None:
            return
        if source.barrier == offset:  # a replay meets its barrier again: confirm as then
            self._confirm_parked()
            return
        if self._holding is None or not source.ready(set(live)):
            return
        # A record parked as dated too far ahead is confirmed first, as at a producer's
        # marker: its verdict would come after the barrier, its key's sessions moved away.
        self._confirm_parked()
        self._out += source.migrate(offset, ended=ended)
        _log.info(
            "resize_barrier",
            stream=self.stream,
            offset=offset,
            sessions=source.counts.sessions,
            fragments=source.counts.fragments,
        )
        self._release()

    def _settle(self) -> None:
        target = self.target
        if target is None or self._holding is None:
            return
        was_settled = target.settled  # the hold waits for the start's record: said once
        if target.settle():
            if not was_settled:
                _log.info("resize_settled", stream=self.stream, epoch=target.epoch.epoch)
                self._engine.attach(None)
            self._release()

    def _release(self) -> None:
        """Let the safe offset pass the epoch's start once it is recorded and passed."""
        if self._holding is None or not self._is_recorded():
            return
        passed = self.source is not None and self.source.passed
        settled = self.target is not None and self.target.settled
        if passed or settled or (self.source is None and self.target is None):
            self._engine.release(self._holding)
            self._holding = None

    def _is_recorded(self) -> bool:
        recorded = self._recorded
        barrier = None if self.source is None else self.source.barrier
        return (
            recorded is not None
            and self.epoch is not None
            and recorded.epoch == self.epoch
            and recorded.start == self.start
            and recorded.barrier == barrier
        )

    def _forward(self, record: Forward | ForwardEnd) -> Fragment | Watermark | None:
        apply, released = self.forwards.forward(record)
        self._unhold(released)
        if not apply:
            self.duplicates += 1
            return None
        assert record.offset is not None
        item: Fragment | Watermark
        if isinstance(record, ForwardEnd):
            item = Watermark(record.timestamp_ms, True, record.offset)
        else:
            item = Fragment(record.offset, record.key, record.timestamp_ms, record.fields)
        # The hold keeps the stream time before the forward: that of after the verdict on a
        # parked record, which the forward gives (a replay from here would not meet it again).
        self._out += self._engine.judge_parked_by(item)
        if self._engine.parked_offset is None:  # else a hook failed: it is a dead letter
            self._engine.hold(record.offset)
            self._forward_holds.add(record.offset)
        return item

    def _unhold(self, released: list[tuple[int, int | None]]) -> None:
        for offset, repeat in released:
            if offset in self._forward_holds:
                self._forward_holds.discard(offset)
                if repeat is None:
                    self._engine.release(offset)
                else:  # a replay from between the two would apply the repeat afresh
                    self._engine.release_past(offset, repeat)

    def _emit(self, record: Control, target: int) -> None:
        key, value, headers, stamp = encode_control(record)
        self._out.append(Outgoing(stream_name(self.app, target), key, value, headers, stamp))
