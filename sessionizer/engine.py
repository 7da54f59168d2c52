"""`SessionEngine`: turns one stream's records into finished sessions (pure: no I/O, no clock).

Time is event time.  Stream time is the largest event time seen on the stream,
fragments and watermarks alike; a fragment more than `grace` behind it is late.
A session is emitted once no on-time fragment could still join it (see
`sessionizer.timeline`), so the sessions equal the batch definition
(`sessionizer.reference`) of the on-time fragments.  The hooks run when a
session is final, over its fragments in event-time order: out-of-order arrival
never needs a merge hook or a re-fold.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sessionizer.errors import OffsetOrderError, SessionError
from sessionizer.processor import StreamProcessor, Timing
from sessionizer.records import (
    EngineOutput,
    FinishedSession,
    Fragment,
    HookFailure,
    LateFragment,
    Record,
    Watermark,
    session_id,
)
from sessionizer.timeline import KeyTimeline, Member, Segment
from state.record import IgnoreEntry, StreamState
from state.tracker import SafeOffsetTracker

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


class SessionEngine:
    """The sessions of one stream, driven by a `StreamProcessor`'s hooks."""

    def __init__(
        self, stream: str, processor: StreamProcessor, resume: StreamState | None = None
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
        self._fragments = self._watermarks = self._sessions = 0
        self._late = self._skipped = self._hook_failures = 0

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
        outputs = self._advance(watermark.timestamp_ms)
        if watermark.end_of_input:
            outputs.extend(self._close_all())
        return outputs

    def _on_fragment(self, fragment: Fragment) -> list[EngineOutput]:
        self._fragments += 1
        try:
            event_time = _event_time(
                self.processor.timestamp(fragment.value, fragment.timestamp_ms)
            )
        except Exception as exc:  # a user hook: any failure goes to the dead letters
            return [self._hook_failed(fragment, "timestamp", exc)]
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

    def _finish(self, key: str, segment: Segment) -> list[EngineOutput]:
        members = segment.members
        tail = members[-1]
        self._tracker.session_finished(
            segment.first_offset,
            IgnoreEntry(key, segment.first_ts, tail.timestamp_ms, segment.last_offset, tail.offset),
        )
        ident = session_id(self.stream, segment.first_offset, key)
        try:
            result = _fold(self.processor, key, members)
        except _HookFailed as failed:
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
            )
        ]

    def _hook_failed(self, fragment: Fragment, hook: str, exc: Exception) -> HookFailure:
        self._hook_failures += 1
        return HookFailure(fragment, hook, _describe(exc))


class _HookFailed(Exception):
    def __init__(self, hook: str, error: str) -> None:
        super().__init__(f"{hook}: {error}")
        self.hook = hook
        self.error = error


def _fold(processor: StreamProcessor, key: str, members: list[Member]) -> dict[str, Any]:
    """Run open, update (every member) and close; raise `_HookFailed` naming the hook."""
    hook = "open"
    try:
        session = processor.open(key, members[0].fragment.value)
        hook = "update"
        for member in members:
            replacement = processor.update(session, member.fragment.value)
            if replacement is not None:
                session = replacement
        hook = "close"
        result = processor.close(key, session)
    except Exception as exc:  # a user hook: any failure goes to the dead letters
        raise _HookFailed(hook, _describe(exc)) from exc
    if not isinstance(result, Mapping):
        raise _HookFailed("close", f"close() must return a dict, got {type(result).__name__}")
    return dict(result)


def _event_time(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TypeError(f"timestamp() must return epoch milliseconds, got {value!r}")
    return int(value)


def _late(fragment: Fragment, event_time: int, stream_time: int, grace_ms: int) -> LateFragment:
    behind = stream_time - event_time
    reason = (
        f"late: event time {event_time} is {behind} ms behind stream time {stream_time}, "
        f"more than the grace of {grace_ms} ms"
    )
    return LateFragment(fragment, event_time, stream_time, reason)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
