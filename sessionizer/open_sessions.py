"""`OpenSessions`: one stream's open sessions by key, and when to look at each key again.

Each key with open sessions has a `KeyTimeline`.  Two queues (`DueQueue`) say when
a key is due: at its first session's deadline, and one past its first raw member's
event time (that member is folded once the *fold line*, `stream time - grace`, is
above it).  Two queues, so that sessions still close in the order of their
deadlines.  Lazy deletion: an entry counts while its time is the key's
`deadline_due` / `fold_due`; appending to a session schedules nothing.

Every open session holds the stream's safe offset at its first offset: the
sessions are registered with the `SafeOffsetTracker` here, as they open, merge,
split, move away or are taken, and the engine reports them finished.  The engine
(`sessionizer.engine`) decides what a record does; this is where the result waits
until the line makes it due.
"""

from __future__ import annotations

from typing import Any

from sessionizer import hooks
from sessionizer.due_queue import DueQueue
from sessionizer.migration import KeyGate
from sessionizer.processor import StreamProcessor, Timing
from sessionizer.segment import Member, Segment, SessionLimits
from sessionizer.timeline import KeyTimeline, first_raw_ts, next_deadline, place, pop_final
from state.tracker import SafeOffsetTracker

__all__ = ["OpenSessions"]


class OpenSessions:
    """The keys' timelines of one stream, with the queues of when each key is due."""

    def __init__(self, tracker: SafeOffsetTracker, timing: Timing) -> None:
        self.timelines: dict[str, KeyTimeline] = {}
        """Each key's open sessions (a key is here while it has at least one)."""
        self._tracker = tracker
        self._limits = SessionLimits(timing)
        self._deadlines = DueQueue(self._deadline_of)
        self._folds = DueQueue(self._fold_of)

    @classmethod
    def restore(
        cls,
        tracker: SafeOffsetTracker,
        timing: Timing,
        timelines: tuple[KeyTimeline, ...],
        deadlines: tuple[tuple[int, str], ...],
        folds: tuple[tuple[int, str], ...],
    ) -> OpenSessions:
        """Rebuild what `queued` and the timelines described (a handover), with the tracker
        that knows their sessions."""
        opened = cls(tracker, timing)
        opened.timelines = {timeline.key: timeline for timeline in timelines}
        for due, key in deadlines:
            opened._deadlines.add(due, key)
        for due, key in folds:
            opened._folds.add(due, key)
        return opened

    def queued(self) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
        """The deadline and fold entries that still count, sorted (what a handover carries)."""
        return self._deadlines.live(), self._folds.live()

    def place(self, key: str, member: Member) -> None:
        """Add an on-time member to its key's sessions."""
        timeline = self.timelines.get(key)
        if timeline is None:
            timeline = self.timelines[key] = KeyTimeline(key)
        changed = place(timeline, member, self._limits)
        if changed is not None:
            dropped, added = changed
            for first_offset in dropped:
                self._tracker.session_dropped(first_offset)
            for segment in added:
                self._tracker.session_opened(key, segment.first_offset)
            self.schedule(timeline)

    def place_held(self, key: str, members: list[Member]) -> None:
        """Place members sorted by (event time, offset) whose offsets may lie before those of
        the key's sessions (a resize held them back); the sessions are registered anew."""
        timeline = self.timelines.get(key) or KeyTimeline(key)
        for segment in timeline:
            self._tracker.session_dropped(segment.first_offset)
        for member in members:
            place(timeline, member, self._limits)
        for segment in timeline:
            segment.rebound()
            self._tracker.session_opened(key, segment.first_offset)
        if timeline:
            self.timelines[key] = timeline
            self.schedule(timeline)

    def take(self, key: str) -> list[Segment]:
        """Remove the key's open sessions (no longer holding the safe offset)."""
        timeline = self.timelines.pop(key, None)
        if timeline is None:
            return []
        for segment in timeline:
            self._tracker.session_dropped(segment.first_offset)
        return list(timeline)

    def adopt(self, key: str, segments: list[Segment]) -> None:
        """Make `segments` (in event-time order, this stream's offsets) the key's sessions."""
        if not segments:
            return
        timeline = self.timelines[key] = KeyTimeline(key)
        timeline.extend(segments)
        for segment in segments:
            self._tracker.session_opened(key, segment.first_offset)
        self.schedule(timeline)

    def take_session(self, key: str, first_offset: int) -> Segment:
        """Remove the key's session that starts at `first_offset`, to finish it now."""
        timeline = self.timelines[key]
        segment = timeline.take(first_offset)
        if not timeline:
            del self.timelines[key]  # its queue entries are now stale
        return segment

    def pop_keys(self, keys: list[str]) -> list[tuple[str, Segment]]:
        """Remove and return every open session of `keys`, to finish them now."""
        final: list[tuple[str, Segment]] = []
        for key in keys:
            timeline = self.timelines.pop(key, None)
            for segment in timeline.pop_all() if timeline is not None else ():
                final.append((key, segment))
        return final

    def schedule(self, timeline: KeyTimeline) -> None:
        """Make sure the queues fire for the key's next deadline and its next member to fold."""
        # Each slot read once: `KeyTimeline` is a Python class, so compiled, every read of
        # one is a lookup by name (benchmarks/HOT_PATH.md, round 12).
        deadline = next_deadline(timeline, self._limits)
        if deadline is not None:
            due = timeline.deadline_due
            if due is None or deadline < due:
                timeline.deadline_due = deadline
                self._deadlines.add(deadline, timeline.key)
        first = first_raw_ts(timeline)
        if first is not None:
            fold = timeline.fold_due
            if fold is None or first + 1 < fold:
                timeline.fold_due = first + 1
                self._folds.add(first + 1, timeline.key)

    def due(
        self, line: int, processor: StreamProcessor[Any], gate: KeyGate | None
    ) -> list[tuple[str, Segment]] | None:
        """Fold what is below `line`, then remove and return the sessions final at `line`, in
        the order of their deadlines (None: none); `gate` keeps keys out of both."""
        # Once per record: nothing is due most of the time, and that costs no call.
        if self._folds.earliest <= line:
            self._fold_due(line, processor, gate)
        return self._pop_final(line, gate) if self._deadlines.earliest <= line else None

    def _fold_due(self, line: int, processor: StreamProcessor[Any], gate: KeyGate | None) -> None:
        folds = self._folds
        while folds.earliest <= line and (entry := folds.pop_due(line)) is not None:
            due, key = entry
            timeline = self.timelines.get(key)
            if timeline is not None and timeline.fold_due == due:
                timeline.fold_due = None
                if gate is not None and gate.keeps(key):
                    continue  # kept raw for a resize (rescheduled by its next change)
                hooks.fold_below(processor, timeline, line)
                self.schedule(timeline)

    def _pop_final(self, line: int, gate: KeyGate | None) -> list[tuple[str, Segment]]:
        final: list[tuple[str, Segment]] = []
        deadlines = self._deadlines
        while deadlines.earliest <= line and (entry := deadlines.pop_due(line)) is not None:
            due, key = entry
            timeline = self.timelines.get(key)
            if timeline is None or timeline.deadline_due != due:
                continue  # stale: superseded by an earlier deadline that already fired
            timeline.deadline_due = None
            if gate is not None and gate.keeps(key):
                continue  # kept open for a resize (rescheduled by its next change)
            for segment in pop_final(timeline, line, self._limits):
                final.append((key, segment))
            if timeline:
                self.schedule(timeline)
            else:
                del self.timelines[key]
        return final

    def pop_all(self) -> list[tuple[str, Segment]]:
        """Remove and return every open session, by first offset (end of input)."""
        pending = [(key, s) for key, tl in self.timelines.items() for s in tl.pop_all()]
        self.timelines.clear()
        self._deadlines.clear()
        self._folds.clear()
        return sorted(pending, key=lambda item: item[1].first_offset)

    def _deadline_of(self, key: str) -> int | None:
        timeline = self.timelines.get(key)
        return None if timeline is None else timeline.deadline_due

    def _fold_of(self, key: str) -> int | None:
        timeline = self.timelines.get(key)
        return None if timeline is None else timeline.fold_due
