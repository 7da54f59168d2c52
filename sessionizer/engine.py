"""`SessionEngine`: turns one stream's records into finished sessions (pure: no I/O, no clock).

Time is event time.  Stream time is the largest event time seen on the stream,
fragments and watermarks alike; a fragment more than `grace` behind it is late.
A session is emitted once no on-time fragment could still join it (see
`sessionizer.timeline`), so the sessions equal the batch definition
(`sessionizer.reference`) of the on-time fragments.

An open session costs its folded state, not its fragments: a fragment is folded
into its session (`open`, `update`) as soon as its event time is below
`stream time - grace`, the *fold line*; no on-time fragment can sort before it
any more, so the hooks still see each session's fragments in event-time order
and out-of-order arrival never needs a merge hook or a re-fold.  Only fragments
inside the grace window stay raw; `close` runs when the session is final.  The
fold line is stream time, a function of the log, so a replay folds the same
fragments at the same records.  The open sessions by key, and when each key is
due to fold or close, are `OpenSessions` (`sessionizer.open_sessions`).

Two policies keep one stream from being ruined by a few records, both decided by
the log alone, so a replay decides the same way (docs/sessions.md):

- a record dated more than `max_lead` ahead of stream time is *parked*; the next
  record confirms it (it is not more than `max_lead` behind it) or refutes it;
- when the ignore list would outgrow `IGNORE_LIST_BUDGET_BYTES`, the oldest open
  session is closed there and then, marked `truncated`.

The engine owns its state: `snapshot(offset)` returns the `StreamState` a commit
stores; `export_state()` the rest (`EngineState`), which `restore` builds the
next owner's engine from (a handover; `sessionizer.handover` encodes it).  A live
resize moves single keys' open sessions between engines (`take_sessions`,
`restore_sessions`; `sessionizer.migration`), with a `KeyGate` that may hold back,
take or refuse a fragment before it is placed (`attach`; none by default).
"""

from __future__ import annotations

from typing import Any, Final

from framework.kernel.fragment import Fragment
from framework.kernel.watermark import Watermark
from sessionizer import hooks
from sessionizer.engine_state import EngineState, Parked
from sessionizer.errors import OffsetOrderError, SessionError
from sessionizer.migration import LATE, PLACE, KeyGate
from sessionizer.open_sessions import OpenSessions
from sessionizer.processor import StreamProcessor, Timing
from sessionizer.producer_clocks import ProducerClocks, skew_ms
from sessionizer.records import (
    EngineCounters,
    EngineOutput,
    HookFailure,
    LateFragment,
    Record,
    finished_session,
    future_fragment,
    late_fragment,
    session_id,
)
from sessionizer.segment import Member, Segment
from state.record import StreamState, ignore_entry
from state.tracker import IGNORE_LIST_BUDGET_BYTES, SafeOffsetTracker

__all__ = ["SessionEngine"]


class SessionEngine:
    """The sessions of one stream, driven by a `StreamProcessor`'s hooks."""

    def __init__(
        self,
        stream: str,
        processor: StreamProcessor[Any],
        resume: StreamState | None = None,
        *,
        ignore_budget_bytes: int = IGNORE_LIST_BUDGET_BYTES,
    ) -> None:
        state = resume if resume is not None else StreamState.initial(stream)
        if state.stream != stream:
            raise SessionError(f"stream {stream}: cannot resume from the state of {state.stream}")
        self.stream = stream
        self.processor = processor
        self.timing = Timing.of(processor)
        # Read for every record: native fields, where a `Timing` field is a lookup by name.
        self._grace_ms: Final[int] = self.timing.grace_ms
        self._max_lead_ms: Final[int | None] = self.timing.max_lead_ms
        self._own_timestamp = not hooks.keeps_default(processor, "timestamp")
        self._own_is_end = not hooks.keeps_default(processor, "is_end")
        self._epoch = state.epoch
        self._stream_time_ms = state.stream_time_ms
        # Who writes the stream (several producers: docs/sessions.md), as of the safe offset.
        self._clocks = ProducerClocks(skew_ms(processor), state.producers)
        self._tracker = SafeOffsetTracker(
            next_offset=state.safe_offset, stream_time_ms=state.stream_time_ms, ignore=state.ignore
        )
        self._open = OpenSessions(self._tracker, self.timing)
        self._budget = ignore_budget_bytes
        self._parked: Parked | None = None
        self._fragments = self._watermarks = self._sessions = 0
        self._late = self._skipped = self._hook_failures = 0
        self._future = self._truncated = self._invalid_watermarks = 0
        self._gate: KeyGate | None = None  # a resize in progress (`attach`)

    @property
    def stream_time_ms(self) -> int | None:
        """The largest event time seen (None before the first record)."""
        return self._stream_time_ms

    @property
    def counters(self) -> EngineCounters:
        """Return the engine's counters."""
        return EngineCounters(
            fragments=self._fragments,
            watermarks=self._watermarks,
            sessions=self._sessions,
            late=self._late,
            skipped_by_ignore_list=self._skipped,
            hook_failures=self._hook_failures,
            open_sessions=self._tracker.open_sessions,
            future=self._future,
            truncated=self._truncated,
            invalid_watermarks=self._invalid_watermarks,
        )

    def raw_fragments(self) -> int:
        """Return how many fragments open sessions hold unfolded (those inside the grace).

        Counts over every open session: for tests and measurements, not per record.
        """
        return sum(
            len(segment.raw) for timeline in self._open.timelines.values() for segment in timeline
        )

    def process(self, record: Record) -> list[EngineOutput]:
        """Process the stream's next record; return what it finished or rejected."""
        if isinstance(record, Watermark):
            if record.offset is None:
                raise SessionError(f"stream {self.stream}: a watermark without its offset")
            return self.process_watermark(
                record.offset, record.timestamp_ms, record.end, record.producer, record.marker
            )
        # The fragment as the wire decoder made it: the engine keeps this object itself.
        offset = record.offset
        self._expect(offset)
        return self._settle(offset, self._on_fragment(record))

    def process_fragment(
        self, offset: int, key: str, timestamp_ms: int, value: dict[str, Any]
    ) -> list[EngineOutput]:
        """Process the stream's next record, a fragment given by its decoded parts: the same
        as `process(Fragment(offset, key, timestamp_ms, value))`."""
        return self.process(Fragment(offset, key, timestamp_ms, value))

    def process_watermark(
        self,
        offset: int,
        timestamp_ms: int,
        end_of_input: bool = False,
        producer: str | None = None,
        marker: str | None = None,
    ) -> list[EngineOutput]:
        """Process the stream's next record, a watermark (or a producer's marker) by its parts."""
        self._expect(offset)
        outputs = self._on_watermark(offset, timestamp_ms, end_of_input, producer, marker)
        return self._settle(offset, outputs)

    def snapshot(self, next_offset: int, *, user_blob: bytes | None = None) -> StreamState:
        """Return the state to commit when every record before `next_offset` is processed."""
        if next_offset < self._tracker.next_offset:
            raise OffsetOrderError(
                f"stream {self.stream}: snapshot at offset {next_offset}, but records up to "
                f"{self._tracker.next_offset - 1} have been processed"
            )
        self._tracker.advance(next_offset, self._stream_time_ms)
        return StreamState(
            stream=self.stream,
            epoch=self._epoch,
            safe_offset=self._tracker.safe_offset,
            committed_offset=next_offset,
            stream_time_ms=self._tracker.stream_time_at_safe_offset(self._opened_before),
            ignore=self._tracker.ignore_list(),
            user_blob=user_blob,
            open_sessions=self._tracker.open_sessions,
            producers=self._clocks.saved_before(self._tracker.safe_offset),
        )

    @property
    def next_offset(self) -> int:
        """The offset of the next record the engine expects (one past the last it read)."""
        return self._tracker.next_offset

    @property
    def ignore_budget_bytes(self) -> int:
        """The ignore list's budget this engine closes sessions to stay within."""
        return self._budget

    def export_state(self) -> EngineState:
        """Return what the engine holds beyond `snapshot`'s `StreamState`, for a handover.

        The value holds the engine's parts themselves (see `EngineState`): export an
        engine that is done, and restore the value once.
        """
        deadlines, folds = self._open.queued()
        return EngineState(
            stream_time_ms=self._stream_time_ms,
            tracker=self._tracker,
            timelines=tuple(self._open.timelines.values()),
            deadlines=tuple(deadlines),
            folds=tuple(folds),
            parked=self._parked,
            clocks=self._clocks,
        )

    @classmethod
    def restore(
        cls,
        processor: StreamProcessor[Any],
        state: StreamState,
        saved: EngineState,
        *,
        ignore_budget_bytes: int = IGNORE_LIST_BUDGET_BYTES,
    ) -> SessionEngine:
        """Build the engine that exported `saved`, for the owner that loaded `state`.

        The engine takes `saved`'s parts over.  It does not check that they extend
        `state`: a handover checks the document first (`sessionizer.handover_check`)
        and the restored engine's `snapshot` after (`sessionizer.handover`).
        """
        engine = cls(state.stream, processor, state, ignore_budget_bytes=ignore_budget_bytes)
        engine._stream_time_ms = saved.stream_time_ms
        engine._tracker = saved.tracker
        engine._open = OpenSessions.restore(
            saved.tracker, engine.timing, saved.timelines, saved.deadlines, saved.folds
        )
        engine._parked = saved.parked
        engine._clocks = saved.clocks
        return engine

    # -- a live resize (docs/resize.md; `sessionizer.migration`) ------------------------

    def attach(self, gate: KeyGate | None) -> None:
        """Consult `gate` before placing any fragment, and when finishing (None: no gate)."""
        self._gate = gate

    def live_producers(self) -> frozenset[str]:
        """The named producers live on the stream now (docs/sessions.md, "Several producers")."""
        return frozenset(name for name, _ in self._clocks.export_state()["live"])

    @property
    def parked_offset(self) -> int | None:
        """The offset of the record parked as dated too far ahead, if one is."""
        return None if self._parked is None else _offset(self._parked.record)

    def open_keys(self) -> list[str]:
        """The keys with open sessions, sorted."""
        return sorted(self._open.timelines)

    def first_offsets(self, key: str) -> list[int]:
        """The first offsets of the key's open sessions."""
        return [segment.first_offset for segment in self._open.timelines.get(key, ())]

    def skips(self, key: str, offset: int, event_time: int) -> bool:
        """True if the resumed ignore list covers a record of `key` (a replay meets it again)."""
        return self._tracker.should_skip(key, offset, event_time)

    def take_sessions(self, key: str) -> list[Segment]:
        """Remove the key's open sessions (they go on on another stream): not finished, not
        in the ignore list, no longer holding the safe offset."""
        return self._open.take(key)

    def restore_sessions(self, key: str, segments: list[Segment]) -> None:
        """Make `segments` (in event-time order, this stream's offsets) the key's open sessions."""
        if key in self._open.timelines:
            raise SessionError(f"stream {self.stream}: key {key!r} has open sessions already")
        self._open.adopt(key, segments)

    def place_held(
        self, key: str, held: list[tuple[Fragment, int, int | None]]
    ) -> list[EngineOutput]:
        """Place fragments a gate held back, as (fragment, event time, stream time before it)
        sorted by (event time, offset); `catch_up` then folds and closes what is due.

        Their offsets may lie before those of the key's migrated parts, so the key's
        sessions are registered with the tracker again afterwards.
        """
        outputs: list[EngineOutput] = []
        members: list[Member] = []
        for fragment, event_time, before in held:
            try:
                is_end = self._own_is_end and hooks.is_end(self.processor, fragment)
            except Exception as exc:  # a user hook: any failure goes to the dead letters
                outputs.append(self._hook_failed(fragment, "is_end", exc))
                continue
            members.append((event_time, fragment.offset, is_end, before, fragment))
        self._open.place_held(key, members)
        return outputs

    def catch_up(self) -> list[EngineOutput]:
        """Fold and close what stream time has made due (after restoring or placing)."""
        return self._advance(None)

    def close_keys(self, keys: list[str]) -> list[EngineOutput]:
        """Finish every open session of these keys now (input ended before they arrived)."""
        outputs: list[EngineOutput] = []
        for key, segment in self._open.pop_keys(keys):
            outputs.extend(self._finish(key, segment))
        return outputs

    def hold(self, offset: int) -> None:
        """Hold the safe offset at `offset` (read when stream time was what it is now)."""
        self._tracker.hold(offset, self._stream_time_ms)

    def release(self, offset: int) -> None:
        """Stop holding the safe offset at `offset`."""
        self._tracker.release(offset)

    def release_past(self, offset: int, bound: int) -> None:
        """Stop holding at `offset` once nothing else holds the safe offset at or before `bound`."""
        self._tracker.release_past(offset, bound)

    def confirm_parked(self) -> list[EngineOutput]:
        """Confirm the record parked as dated too far ahead, as a producer's marker does.

        A resize does so where it holds the safe offset or moves sessions: a replay
        from a later record would not meet the parked one again (docs/resize.md).
        """
        return self._resolve_parked(None)

    def judge_parked_by(self, record: Record) -> list[EngineOutput]:
        """Judge the parked record as processing `record` next will, before processing it
        (a resize acts on the verdict before the record: docs/resize.md).

        The verdicts are those of `_on_watermark` and `_on_fragment`
        (tests/unit/test_engine_future_property.py holds them to it).
        """
        if self._parked is None:
            return []
        if isinstance(record, Watermark):
            time = record.timestamp_ms
            if not hooks.valid_time(time):
                return self._resolve_parked(None) if record.end else []
            return self._resolve_parked(None if record.marker else time)
        try:
            event_time = self._event_time(record)
        except Exception:  # a user hook: processing the record dead-letters it, as always
            return []  # and, as always, leaves the parked record waiting
        return self._resolve_parked(event_time)

    def skip(self, offset: int) -> list[EngineOutput]:
        """Step past a record the engine does not interpret (a resize record)."""
        self._expect(offset)
        return self._settle(offset, [])

    def _expect(self, offset: int) -> None:
        if offset < self._tracker.next_offset:
            raise OffsetOrderError(
                f"stream {self.stream}: record at offset {offset}, but the engine "
                f"expects offsets from {self._tracker.next_offset} on (seek to the safe offset)"
            )

    def _settle(self, offset: int, outputs: list[EngineOutput]) -> list[EngineOutput]:
        self._tracker.advance(offset + 1, self._stream_time_ms)
        # After every record, not at commits: a replay meets the same records and so
        # makes the same decision at the same offset.
        if self._tracker.over_budget(self._budget):
            outputs.extend(self._bound_ignore_list())
        return outputs

    def _on_watermark(
        self, offset: int, time: int, end: bool, producer: str | None, marker: str | None
    ) -> list[EngineOutput]:
        self._watermarks += 1
        if not hooks.valid_time(time):
            self._invalid_watermarks += 1
            if not end:
                return []
            # Nothing is left to refute a parked record: take it, then close everything.
            return self._resolve_parked(None) + self._close_all()
        # A marker's time is a producer's clock, no witness: it confirms a parked record.
        # (`judge_parked_by` gives a resize the verdicts of this method and `_on_fragment`.)
        outputs = self._resolve_parked(None if marker else time)
        if not end and not marker and self._too_far_ahead(time):
            self._park(Watermark(time, offset=offset, producer=producer), time)
            return outputs
        # An end of input's time cannot be confirmed by what comes after it.
        future = end and not marker and self._too_far_ahead(time)
        allowed, ends = self._clocks.watermark(offset, producer, marker, time, end)
        self._future += future
        outputs.extend(self._advance(None if future else allowed))
        return outputs + self._close_all() if ends else outputs

    def _on_fragment(self, fragment: Fragment) -> list[EngineOutput]:
        self._fragments += 1
        try:
            event_time = self._event_time(fragment)
        except Exception as exc:  # a user hook: any failure goes to the dead letters
            # Without an event time it neither moves stream time nor judges a parked record.
            return [self._hook_failed(fragment, "timestamp", exc)]
        outputs = self._resolve_parked(event_time) if self._parked is not None else []
        if self._too_far_ahead(event_time):
            self._park(fragment, event_time)
            return outputs
        placed = self._place(fragment, event_time)
        return outputs + placed if outputs else placed

    def _event_time(self, fragment: Fragment) -> int:
        """The fragment's event time by the processor's `timestamp` hook (may raise)."""
        if self._own_timestamp:
            return hooks.timestamp(self.processor, fragment)
        return hooks.event_time(fragment.timestamp_ms)  # what the default hook returns

    def _too_far_ahead(self, event_time: int) -> bool:
        """Return True if `event_time` is more than `max_lead` ahead of stream time."""
        lead = self._max_lead_ms
        if lead is None:  # the default: no clock to look at, for every record
            return False
        # Several producers: of the fastest producer's clock, at least.
        reference = self._clocks.lead_reference(self._stream_time_ms)
        # A stream's first event time has nothing to be measured against: it is taken.
        if reference is None:
            return False
        return event_time - reference > lead

    def _park(self, record: Record, event_time: int) -> None:
        """Hold a record dated too far ahead until the next record's verdict."""
        self._parked = Parked(record, event_time, self._stream_time_ms)
        # A replay from a commit made now must meet it again, to judge it the same way.
        self._tracker.hold(_offset(record), self._stream_time_ms)

    def _resolve_parked(self, event_time: int | None) -> list[EngineOutput]:
        """Let the next record's event time confirm or refute the parked record (None: confirm)."""
        parked = self._parked
        if parked is None:
            return []
        self._parked = None
        record = parked.record
        self._tracker.release(_offset(record))
        lead = self._max_lead_ms
        assert lead is not None  # nothing is parked without a lead
        if event_time is None or parked.event_time_ms - event_time <= lead:
            if isinstance(record, Watermark):
                verdict = self._clocks.watermark(
                    _offset(record), record.producer, None, parked.event_time_ms, False
                )
                return self._advance(verdict[0])
            return self._place(record, parked.event_time_ms)
        self._future += 1
        if isinstance(record, Watermark):
            return []  # dropped; counted
        return [
            future_fragment(record, parked.event_time_ms, parked.stream_time_ms, event_time, lead)
        ]

    def _place(self, fragment: Fragment, event_time: int) -> list[EngineOutput]:
        """Skip, reject as late, or add a fragment to its key's sessions."""
        offset, key = fragment.offset, fragment.key
        before = self._stream_time_ms
        if self._tracker.should_skip(key, offset, event_time):
            # Already in a finished session; it still moves stream time, as it did then.
            self._skipped += 1
            return self._advance(self._clocks.fragment(event_time))
        if before is not None and event_time < before - self._grace_ms:
            self._late += 1
            return [late_fragment(fragment, event_time, before, self._grace_ms)]
        gate = self._gate
        if gate is not None:
            admitted = gate.admit(fragment, event_time, before)
            if admitted != PLACE:  # held back or taken: read on time, it moves stream time
                moved = self._advance(self._clocks.fragment(event_time))
                if admitted == LATE:
                    self._late += 1
                    reason = "it sorts before the folded part of its key's migrated session"
                    late = LateFragment(fragment, event_time, before or event_time, reason)
                    return [late, *moved]
                return moved
        try:
            is_end = self._own_is_end and hooks.is_end(self.processor, fragment)
        except Exception as exc:  # a user hook: any failure goes to the dead letters
            # Its event time still counts: a replay may skip it, and skipping advances.
            failed = self._hook_failed(fragment, "is_end", exc)
            return [failed, *self._advance(self._clocks.fragment(event_time))]
        self._open.place(key, (event_time, offset, is_end, before, fragment))
        return self._advance(self._clocks.fragment(event_time))

    def _bound_ignore_list(self) -> list[EngineOutput]:
        """Close the oldest open sessions while the ignore list is over its budget."""
        outputs: list[EngineOutput] = []
        while self._tracker.ignore_bytes() > self._budget:
            oldest = self._tracker.oldest_open()
            if oldest is None:
                break  # a parked record holds the safe offset; the next record decides it
            first_offset, key = oldest
            self._truncated += 1
            outputs.extend(
                self._finish(key, self._open.take_session(key, first_offset), truncated=True)
            )
        return outputs

    def _advance(self, event_time: int | None) -> list[EngineOutput]:
        """Raise stream time to `event_time` (None: keep it), then fold and close what is due."""
        if event_time is not None and (
            self._stream_time_ms is None or event_time > self._stream_time_ms
        ):
            self._stream_time_ms = event_time
        if self._stream_time_ms is None:
            return []  # several producers, and the slowest has no clock yet
        # Even without a new stream time, a fragment (an END) can be final at once.
        line = self._stream_time_ms - self._grace_ms
        final = self._open.due(line, self.processor, self._gate)
        if final is None:
            return []
        outputs: list[EngineOutput] = []
        for key, segment in final:
            outputs.extend(self._finish(key, segment))
        return outputs

    def _close_all(self) -> list[EngineOutput]:
        outputs: list[EngineOutput] = []
        for key, segment in self._open.pop_all():
            outputs.extend(self._finish(key, segment))
        return outputs

    def _opened_before(self, first_offset: int, key: str) -> int | None:
        return self._open.timelines[key].opened_before(first_offset)

    def _finish(self, key: str, segment: Segment, *, truncated: bool = False) -> list[EngineOutput]:
        pending = segment.raw
        for member in pending:
            hooks.fold(self.processor, key, segment, member)
        segment.raw = ()
        self._tracker.session_finished(
            segment.first_offset,
            ignore_entry(
                key, segment.first_ts, segment.tail_ts, segment.last_offset, segment.tail_offset
            ),
        )
        stream, first, last = self.stream, segment.first_offset, segment.last_offset
        if self._gate is not None:  # a session that started on another stream keeps its id
            stream, first, last = self._gate.identify(key, segment) or (stream, first, last)
        ident = session_id(stream, first, key)
        try:
            result = hooks.close(self.processor, key, segment)
        except hooks.HookFailed as failed:
            # All or nothing: every fragment of the session goes to the dead letters.
            letters = hooks.dead_letters(key, segment, pending, ident, failed)
            self._hook_failures += len(letters)
            return list(letters)
        self._sessions += 1
        return [
            finished_session(
                ident,
                key,
                stream,
                first,
                last,
                segment.first_ts,
                segment.tail_ts,
                segment.folded,
                result,
                truncated,
            )
        ]

    def _hook_failed(self, fragment: Fragment, hook: str, exc: Exception) -> HookFailure:
        self._hook_failures += 1
        return HookFailure(fragment, hook, hooks.describe(exc), traceback=hooks.trace(exc))


def _offset(record: Record) -> int:
    offset = record.offset
    assert offset is not None  # `process` refuses a watermark without one
    return offset
