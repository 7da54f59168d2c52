"""`SessionEngine`: turns one stream's records into finished sessions (pure: no I/O, no clock).

Time is event time.  Stream time is the largest event time seen on the stream,
fragments and watermarks alike; a fragment more than `grace` behind it is late.
A session is emitted once no on-time fragment could still join it (see
`sessionizer.timeline`), so the sessions equal the batch definition
(`sessionizer.reference`) of the on-time fragments.  The hooks run when a
session is final, over its fragments in event-time order: out-of-order arrival
never needs a merge hook or a re-fold.

Two policies keep one stream from being ruined by a few records, both decided by
the log alone, so a replay decides the same way (docs/sessions.md):

- a record dated more than `max_lead` ahead of stream time is *parked*; the next
  record confirms it (it is not more than `max_lead` behind it) or refutes it;
- when the ignore list would outgrow `IGNORE_LIST_BUDGET_BYTES`, the oldest open
  session is closed there and then, marked `truncated`.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from sessionizer import hooks
from sessionizer.errors import OffsetOrderError, SessionError
from sessionizer.processor import StreamProcessor, Timing
from sessionizer.records import (
    EngineOutput,
    FinishedSession,
    Fragment,
    FutureFragment,
    HookFailure,
    LateFragment,
    Record,
    Watermark,
    session_id,
)
from sessionizer.timeline import KeyTimeline, Member, Segment
from state.record import IgnoreEntry, StreamState
from state.tracker import IGNORE_LIST_BUDGET_BYTES, SafeOffsetTracker

__all__ = ["EngineCounters", "SessionEngine"]


@dataclass(frozen=True, slots=True)
class EngineCounters:
    """What an engine has done so far (and how many sessions are open now)."""

    fragments: int
    watermarks: int
    sessions: int
    late: int
    skipped_by_ignore_list: int
    hook_failures: int
    open_sessions: int
    future: int = 0
    """Records dated more than `max_lead` ahead that the next record refuted (or an
    end-of-input watermark's time, when that far ahead)."""
    truncated: int = 0
    """Sessions closed early to keep the ignore list within its budget."""
    invalid_watermarks: int = 0
    """Watermarks whose time is not a valid event time (ignored, end of input still counts)."""


@dataclass(frozen=True, slots=True)
class _Parked:
    """A record dated more than `max_lead` ahead, waiting for the next record's verdict."""

    record: Record
    event_time_ms: int
    stream_time_ms: int | None


class SessionEngine:
    """The sessions of one stream, driven by a `StreamProcessor`'s hooks."""

    def __init__(
        self,
        stream: str,
        processor: StreamProcessor,
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
        self._epoch = state.epoch
        self._stream_time = state.stream_time_ms
        self._tracker = SafeOffsetTracker(
            next_offset=state.safe_offset, stream_time_ms=state.stream_time_ms, ignore=state.ignore
        )
        self._timelines: dict[str, KeyTimeline] = {}
        # Min-heap of (deadline, key) with lazy deletion: an entry counts only while
        # `_scheduled[key]` equals its deadline.  An entry may fire early (the key's
        # deadline moved later); it is then rescheduled, so appends push nothing.
        self._heap: list[tuple[int, str]] = []
        self._scheduled: dict[str, int] = {}
        self._budget = ignore_budget_bytes
        self._parked: _Parked | None = None
        self._fragments = self._watermarks = self._sessions = 0
        self._late = self._skipped = self._hook_failures = 0
        self._future = self._truncated = self._invalid_watermarks = 0

    @property
    def stream_time_ms(self) -> int | None:
        """The largest event time seen (None before the first record)."""
        return self._stream_time

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

    def process(self, record: Record) -> list[EngineOutput]:
        """Process the stream's next record; return what it finished or rejected."""
        if record.offset < self._tracker.next_offset:
            raise OffsetOrderError(
                f"stream {self.stream}: record at offset {record.offset}, but the engine "
                f"expects offsets from {self._tracker.next_offset} on (seek to the safe offset)"
            )
        if isinstance(record, Watermark):
            outputs = self._on_watermark(record)
        else:
            outputs = self._on_fragment(record)
        self._tracker.advance(record.offset + 1, self._stream_time)
        # After every record, not at commits: a replay meets the same records and so
        # makes the same decision at the same offset.
        outputs.extend(self._bound_ignore_list())
        return outputs

    def snapshot(self, next_offset: int, *, user_blob: bytes | None = None) -> StreamState:
        """Return the state to commit when every record before `next_offset` is processed."""
        if next_offset < self._tracker.next_offset:
            raise OffsetOrderError(
                f"stream {self.stream}: snapshot at offset {next_offset}, but records up to "
                f"{self._tracker.next_offset - 1} have been processed"
            )
        self._tracker.advance(next_offset, self._stream_time)
        return StreamState(
            stream=self.stream,
            epoch=self._epoch,
            safe_offset=self._tracker.safe_offset,
            committed_offset=next_offset,
            stream_time_ms=self._tracker.stream_time_at_safe_offset,
            ignore=self._tracker.ignore_list(),
            user_blob=user_blob,
            open_sessions=self._tracker.open_sessions,
        )

    def _on_watermark(self, watermark: Watermark) -> list[EngineOutput]:
        self._watermarks += 1
        time = watermark.timestamp_ms
        if not hooks.valid_time(time):
            self._invalid_watermarks += 1
            if not watermark.end_of_input:
                return []
            # Nothing is left to refute a parked record: take it, then close everything.
            return self._resolve_parked(None) + self._close_all()
        outputs = self._resolve_parked(time)
        if not watermark.end_of_input:
            return outputs + self._gate(watermark, time)
        if self._too_far_ahead(time):
            self._future += 1  # nothing after it can confirm its time; it still closes all
        else:
            outputs.extend(self._advance(time))
        outputs.extend(self._close_all())
        return outputs

    def _on_fragment(self, fragment: Fragment) -> list[EngineOutput]:
        self._fragments += 1
        try:
            event_time = hooks.event_time(
                self.processor.timestamp(fragment.value, fragment.timestamp_ms)
            )
        except Exception as exc:  # a user hook: any failure goes to the dead letters
            # Without an event time it neither moves stream time nor judges a parked record.
            return [self._hook_failed(fragment, "timestamp", exc)]
        return self._resolve_parked(event_time) + self._gate(fragment, event_time)

    def _too_far_ahead(self, event_time: int) -> bool:
        """Return True if `event_time` is more than `max_lead` ahead of stream time."""
        lead = self.timing.max_lead_ms
        # A stream's first event time has nothing to be measured against: it is taken.
        if lead is None or self._stream_time is None:
            return False
        return event_time - self._stream_time > lead

    def _gate(self, record: Record, event_time: int) -> list[EngineOutput]:
        """Apply a record with a valid event time, or park it if it jumps too far ahead."""
        if not self._too_far_ahead(event_time):
            return self._apply(record, event_time)
        self._parked = _Parked(record, event_time, self._stream_time)
        # A replay from a commit made now must meet it again, to judge it the same way.
        self._tracker.hold(record.offset, self._stream_time)
        return []

    def _resolve_parked(self, event_time: int | None) -> list[EngineOutput]:
        """Let the next record's event time confirm or refute the parked record (None: confirm)."""
        parked = self._parked
        if parked is None:
            return []
        self._parked = None
        self._tracker.release(parked.record.offset)
        lead = self.timing.max_lead_ms
        assert lead is not None  # nothing is parked without a lead
        if event_time is None or parked.event_time_ms - event_time <= lead:
            return self._apply(parked.record, parked.event_time_ms)
        self._future += 1
        if isinstance(parked.record, Watermark):
            return []  # dropped; counted
        return [_future(parked, parked.record, event_time, lead)]

    def _apply(self, record: Record, event_time: int) -> list[EngineOutput]:
        """Let a record with an accepted event time move stream time or join a session."""
        if isinstance(record, Watermark):
            return self._advance(event_time)
        return self._place(record, event_time)

    def _place(self, fragment: Fragment, event_time: int) -> list[EngineOutput]:
        """Skip, reject as late, or add a fragment to its key's sessions."""
        before = self._stream_time
        if self._tracker.should_skip(fragment.key, fragment.offset, event_time):
            # Already in a finished session; it still moves stream time, as it did then.
            self._skipped += 1
            return self._advance(event_time)
        if before is not None and event_time < before - self.timing.grace_ms:
            self._late += 1
            return [_late(fragment, event_time, before, self.timing.grace_ms)]
        try:
            is_end = bool(self.processor.is_end(fragment.value))
        except Exception as exc:  # a user hook: any failure goes to the dead letters
            # Its event time still counts: a replay may skip it, and skipping advances.
            return [self._hook_failed(fragment, "is_end", exc), *self._advance(event_time)]
        timeline = self._timelines.get(fragment.key)
        if timeline is None:
            timeline = self._timelines[fragment.key] = KeyTimeline(fragment.key)
        member = Member(event_time, fragment.offset, is_end, before, fragment)
        replaced, added = timeline.insert(member, self.timing)
        for segment in replaced:
            self._tracker.session_dropped(segment.first_offset)
        for segment in added:
            opener = segment.opener
            self._tracker.session_opened(fragment.key, opener.offset, opener.stream_time_before)
        self._schedule(timeline)
        return self._advance(event_time)

    def _bound_ignore_list(self) -> list[EngineOutput]:
        """Close the oldest open sessions while the ignore list is over its budget."""
        outputs: list[EngineOutput] = []
        while self._tracker.ignore_bytes() > self._budget:
            oldest = self._tracker.oldest_open()
            if oldest is None:
                break  # a parked record holds the safe offset; the next record decides it
            first_offset, key = oldest
            timeline = self._timelines[key]
            segment = timeline.remove(first_offset)
            if not timeline.segments:
                del self._timelines[key]
                self._scheduled.pop(key, None)  # its heap entries are now stale
            self._truncated += 1
            outputs.extend(self._finish(key, segment, truncated=True))
        return outputs

    def _advance(self, event_time: int) -> list[EngineOutput]:
        if self._stream_time is None or event_time > self._stream_time:
            self._stream_time = event_time
        # Even without a new stream time, a fragment (an END) can be final at once.
        watermark = self._stream_time - self.timing.grace_ms
        outputs: list[EngineOutput] = []
        heap = self._heap
        while heap and heap[0][0] <= watermark:
            deadline, key = heapq.heappop(heap)
            if self._scheduled.get(key) != deadline:
                continue  # superseded by an earlier deadline that already fired
            del self._scheduled[key]
            timeline = self._timelines[key]
            for segment in timeline.pop_final(watermark, self.timing):
                outputs.extend(self._finish(key, segment))
            if timeline.segments:
                self._schedule(timeline)
            else:
                del self._timelines[key]
        return outputs

    def _close_all(self) -> list[EngineOutput]:
        pending = [(key, s) for key, tl in self._timelines.items() for s in tl.pop_all()]
        self._timelines.clear()
        self._heap.clear()
        self._scheduled.clear()
        outputs: list[EngineOutput] = []
        for key, segment in sorted(pending, key=lambda item: item[1].first_offset):
            outputs.extend(self._finish(key, segment))
        return outputs

    def _schedule(self, timeline: KeyTimeline) -> None:
        deadline = timeline.next_deadline(self.timing)
        if deadline is None:
            return
        current = self._scheduled.get(timeline.key)
        if current is None or deadline < current:
            self._scheduled[timeline.key] = deadline
            heapq.heappush(self._heap, (deadline, timeline.key))

    def _finish(self, key: str, segment: Segment, *, truncated: bool = False) -> list[EngineOutput]:
        members = segment.members
        tail = members[-1]
        self._tracker.session_finished(
            segment.first_offset,
            IgnoreEntry(key, segment.first_ts, tail.timestamp_ms, segment.last_offset, tail.offset),
        )
        ident = session_id(self.stream, segment.first_offset, key)
        try:
            result = hooks.fold(self.processor, key, members)
        except hooks.HookFailed as failed:
            # All or nothing: the whole session goes to the dead letters, never a part.
            self._hook_failures += len(members)
            return [HookFailure(m.fragment, failed.hook, failed.error, ident) for m in members]
        self._sessions += 1
        return [
            FinishedSession(
                session_id=ident,
                key=key,
                stream=self.stream,
                first_offset=segment.first_offset,
                last_offset=segment.last_offset,
                first_ts=segment.first_ts,
                last_ts=tail.timestamp_ms,
                fragments=len(members),
                result=result,
                truncated=truncated,
            )
        ]

    def _hook_failed(self, fragment: Fragment, hook: str, exc: Exception) -> HookFailure:
        self._hook_failures += 1
        return HookFailure(fragment, hook, hooks.describe(exc))


def _future(parked: _Parked, fragment: Fragment, refuted_by: int, lead_ms: int) -> FutureFragment:
    before = parked.stream_time_ms
    reason = (
        f"future: event time {parked.event_time_ms} was more than the max_lead of {lead_ms} ms "
        f"ahead of stream time {'(none yet)' if before is None else before}, and the next "
        f"record's event time {refuted_by} is {parked.event_time_ms - refuted_by} ms behind it"
    )
    # A stream with no time yet is measured against the record that refuted it.
    reference = before if before is not None else refuted_by
    return FutureFragment(fragment, parked.event_time_ms, reference, reason)


def _late(fragment: Fragment, event_time: int, stream_time: int, grace_ms: int) -> LateFragment:
    behind = stream_time - event_time
    reason = (
        f"late: event time {event_time} is {behind} ms behind stream time {stream_time}, "
        f"more than the grace of {grace_ms} ms"
    )
    return LateFragment(fragment, event_time, stream_time, reason)
