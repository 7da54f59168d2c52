"""`StreamTask`: one owned stream on a node: its engine, read position, last commit and held
output (the commit order over them is `framework.node.checkpoint.Checkpoint`'s).

A live resize (docs/resize.md) adds the stream's `ResizeGate`, made at the first resize
record the task reads, or at resume when the registry says a resize is behind the
stream's safe offset; until then a task costs one `None` check per record more."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, TypeAlias

from framework.kernel.errors import StreamError
from framework.kernel.fragment import Fragment
from framework.kernel.records import StreamRecord
from framework.kernel.watermark import Watermark
from framework.node.ports import SourceRecord
from framework.node.resize import Outgoing, ResizeGate, StreamResize
from router.errors import UndecodableRecord
from router.fragment import ParsedFragment
from router.resize_wire import decode_control
from router.wire import decode_fragment, encode_fragment
from sessionizer.engine import SessionEngine
from sessionizer.processor import StreamProcessor
from sessionizer.records import (
    EngineOutput,
    FinishedSession,
    FoldedHookFailure,
    FutureFragment,
    HookFailure,
    LateFragment,
)
from sessionizer.sinks import PAYLOAD_NONE, PAYLOAD_ORIGINAL, PAYLOAD_REENCODED, DeadLetter
from state.record import StreamState

__all__ = ["Output", "ResizeUnavailable", "StreamTask"]


class ResizeUnavailable(StreamError):
    """A stream must write resize records to other streams, and its owner cannot send them."""

    def __init__(self, stream: str) -> None:
        super().__init__(
            stream,
            "a live resize needs this node to write migration records to "
            "other streams, which this release's sink cannot send (docs/resize.md, 'What the "
            "node needs'); stop the resize's producers and nodes, or run a node that can",
        )


Output: TypeAlias = FinishedSession | DeadLetter


@dataclass
class StreamTask:
    """The engine of one stream, the offset of the next record to read, and its last commit."""

    stream: str
    engine: SessionEngine
    position: int
    committed: StreamState
    """The last state known to be stored: what a rewind resumes from."""
    dead_letters: int = 0
    unsent: list[Output] = field(default_factory=list)
    """Output held back until the next state commit (at-most-once delivery only)."""
    resize: StreamResize | None = None
    """The registry's record of this stream's part in the latest resize, if any."""
    gate: ResizeGate | None = None
    """The stream's part in a live resize (docs/resize.md), once it has one."""
    outgoing: list[Outgoing] | None = None
    """Where the records the stream writes to other streams go (a resize's), for whoever
    sends them; None: this owner cannot send them, and a task that must raises
    `ResizeUnavailable` (the node's crash path) rather than lose them."""
    started_at: int = field(init=False)
    """The position it was made at: `node_stats` tells a reading node by it at its first
    report."""

    def __post_init__(self) -> None:
        self.started_at = self.position

    @classmethod
    def resume(
        cls,
        processor: StreamProcessor[Any],
        state: StreamState,
        resize: StreamResize | None = None,
    ) -> StreamTask:
        """A task that continues from a stored state, reading from its safe offset."""
        engine = SessionEngine(state.stream, processor, resume=state)
        task = cls(state.stream, engine, position=state.safe_offset, committed=state)
        task.know_resize(resize)
        return task

    def know_resize(self, resize: StreamResize | None) -> None:
        """What the registry says of this stream's part in the latest resize (at resume, by
        replay or handover: either way a stream reads on past an epoch's start only once
        its gate let go of it there)."""
        self.resize = resize
        if resize is None:
            return
        if self.gate is not None:
            self.gate.start_recorded(resize)
        elif self.position > resize.start:  # it reads on past the epoch's start: settled there
            self.gate = self._gate(behind=True)

    def rewound(self) -> StreamTask:
        """A fresh task from the last commit: what a new owner would resume from."""
        task = StreamTask.resume(self.engine.processor, self.committed, self.resize)
        task.dead_letters = self.dead_letters
        task.outgoing = None if self.outgoing is None else []
        return task

    @property
    def resumed_from(self) -> int:
        """The committed read position of the last stored state."""
        return self.committed.committed_offset

    @property
    def replaying(self) -> bool:
        """Still re-reading records the previous owner had read: nothing new to commit.

        Committing then would move the stored read position backwards (status would
        show a stream going back) without recording anything the store lacks.
        """
        return self.position < self.resumed_from

    def outside_log(self, start: int, end: int) -> str | None:
        """Why resuming this stream would skip records silently, given its log's bounds."""
        stored = self.committed.committed_offset
        if stored > end:
            return (
                f"stored position {stored} is past the log end {end} "
                "(was the topic deleted and created again?)"
            )
        if self.position < start:
            return (
                f"safe offset {self.position} is before the log start {start}: records were "
                "deleted before they were processed"
            )
        return None

    def handle(self, record: SourceRecord) -> list[Output]:
        """Process one record of this stream; return what it produced."""
        offset = record.offset
        try:
            item = decode_fragment(
                record.key, record.value, record.headers, record.timestamp, offset
            )
        except UndecodableRecord as failed:
            exc = failed
            try:
                resized = self._control(record)
            except UndecodableRecord as malformed:  # a resize kind, but not well-formed
                exc, resized = malformed, None
            if resized is not None:
                return resized
            self.position = offset + 1
            if offset < self.committed.committed_offset:
                return []  # replayed: its dead letter went out before the commit (`_new`)
            self.dead_letters += 1
            letter = DeadLetter(
                self.stream,
                offset,
                exc.reason,
                str(exc),
                record.key,
                record.value,
                timestamp_ms=record.timestamp if isinstance(record.timestamp, int) else None,
                exception=type(exc).__name__,
            )
            return [letter]
        gate = self.gate
        if gate is not None:
            gate.reading = offset
            if isinstance(item, Watermark):
                gate.watermark(item)  # before the engine: it may take the barrier first
        # The decoded `Fragment` (or watermark) goes to the engine as it is: one shape.
        produced: list[Any] = self.engine.process(item)
        if gate is not None and gate.busy:
            produced = [*self._route(gate.take()), *produced]
        outputs = (
            [self._output(out, record) for out in self._new(produced, offset)] if produced else []
        )
        self.position = offset + 1
        return outputs

    def snapshot(self) -> StreamState:
        """The state to commit now: everything before `position` is processed."""
        return self.engine.snapshot(self.position)

    def committed_as(self, state: StreamState) -> None:
        """`state` is stored: rewinds start from it."""
        self.committed = state
        if self.gate is not None:
            self.gate.committed(state.committed_offset)

    def _route(self, made: list[Any]) -> list[EngineOutput]:
        """Keep the gate's `Outgoing` records apart (in `outgoing`); return the rest."""
        rest: list[EngineOutput] = []
        for out in made:
            if isinstance(out, Outgoing):
                if self.outgoing is None:
                    raise ResizeUnavailable(self.stream)
                self.outgoing.append(out)
            else:
                rest.append(out)
        return rest

    def _control(self, record: SourceRecord) -> list[Output] | None:
        """A resize record's outputs, or None if the record is of no resize kind."""
        offset = record.offset
        control = decode_control(record.key, record.value, record.headers, record.timestamp, offset)
        if control is None:
            return None
        gate = self.gate
        if gate is None:
            gate = self.gate = self._gate(behind=False)
        gate.reading = offset
        item = gate.control(control)
        engine = self.engine
        if isinstance(item, Watermark):
            gate.watermark(item)
        produced: list[Any] = engine.process(item) if item else engine.skip(offset)
        produced = [*self._route(gate.take()), *produced]
        self.position = offset + 1
        if isinstance(item, Fragment):  # its dead letter carries the fragment, not the forward
            key, value = encode_fragment(ParsedFragment(item.key, item.timestamp_ms, item.value))
            record = StreamRecord(self.stream, offset, key, value, item.timestamp_ms, [])
        return [self._output(out, record) for out in self._new(produced, offset)]

    def _new(self, produced: list[Any], offset: int) -> list[Any]:
        """What reading the record at `offset` produced that no commit holds yet.

        A replay re-reads the records between the safe offset and the last commit's
        position, and decides on each as the run before it did. That run wrote each
        record's dead letters before the commit past the record (at-least-once: flushed
        before it; exactly-once: in its transaction), so a replay that wrote them again
        would show `read_committed` readers the same dead letter twice. Its sessions are
        new: those already written are in the ignore list, and the engine skips them.
        """
        if offset < self.committed.committed_offset:
            return [out for out in produced if isinstance(out, FinishedSession)]
        return produced

    def _gate(self, *, behind: bool) -> ResizeGate:
        return ResizeGate(
            self.stream,
            self.engine,
            resumed_from=self.committed.committed_offset,
            recorded=self.resize,
            behind=behind,
        )

    def _output(self, out: EngineOutput, record: SourceRecord) -> Output:
        if isinstance(out, FinishedSession):
            return out
        self.dead_letters += 1
        if isinstance(out, FoldedHookFailure):
            # A fragment of a failed session that was already folded: the engine kept
            # its offset, not its bytes.  The headers name the stream and the offset.
            error = f"{out.error} (already folded: value left empty, the record is at this offset)"
            return DeadLetter(
                self.stream,
                out.offset,
                f"hook:{out.hook}",
                error,
                out.key.encode("utf-8"),
                b"",
                session_key=out.key,
                session_id=out.session_id,
                exception=_exception_class(out.error),
                traceback=out.traceback,
                payload=PAYLOAD_NONE,
            )
        fragment = out.fragment
        if fragment.offset == record.offset:  # the record in hand: its own bytes
            key, value, payload = record.key, record.value, PAYLOAD_ORIGINAL
        else:
            # Read earlier and no longer held as bytes: re-encoded from its decoded parts
            # (the wire format is deterministic; the offset names the record itself).
            key, value = encode_fragment(
                ParsedFragment(fragment.key, fragment.timestamp_ms, fragment.value)
            )
            payload = PAYLOAD_REENCODED
        letter = DeadLetter(
            self.stream,
            fragment.offset,
            f"hook:{out.hook}" if isinstance(out, HookFailure) else "late",
            "",
            key,
            value,
            timestamp_ms=fragment.timestamp_ms,
            session_key=fragment.key,
            payload=payload,
        )
        if isinstance(out, FutureFragment):
            return replace(letter, reason="future", error=out.reason)
        if isinstance(out, LateFragment):
            behind = out.stream_time_ms - out.event_time_ms
            return replace(letter, error=f"late by {behind} ms behind stream time ({out.reason})")
        return replace(
            letter,
            error=out.error,
            session_id=out.session_id,
            exception=_exception_class(out.error),
            traceback=out.traceback,
        )


def _exception_class(error: str) -> str:
    """The exception class name of a hook failure's "Type: message" text."""
    name = error.split(":", 1)[0]
    return name if name.isidentifier() else ""
