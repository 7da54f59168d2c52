"""The open sessions of one key: its pending fragments in event-time order, split greedily.

The split rule is the batch definition (`sessionizer.reference`): walking a key's
fragments sorted by (event time, offset), a fragment starts a new session when
the previous one was an END fragment, when it is more than `timeout` after the
previous one, or when it is `max_session_duration` or more after the session's
first one.  A session is *final* once no fragment that can still arrive on time
(event time >= stream time - grace) could join it; `Segment.deadline` is the
smallest `stream time - grace` at which that holds.  Along a key, deadlines never
decrease, so sessions become final in event-time order.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from sessionizer.processor import Timing
from sessionizer.records import Fragment

__all__ = ["KeyTimeline", "Member", "Segment"]


@dataclass(frozen=True, slots=True)
class Member:
    """A fragment held by an open session, with what the engine learnt on its arrival."""

    timestamp_ms: int
    offset: int
    is_end: bool
    stream_time_before: int | None
    fragment: Fragment


class Segment:
    """One open session: its members in event-time order."""

    __slots__ = ("first_offset", "last_offset", "members")

    def __init__(self, first: Member) -> None:
        self.members = [first]
        self.first_offset = first.offset
        self.last_offset = first.offset

    @property
    def first_ts(self) -> int:
        """Event time of the first member."""
        return self.members[0].timestamp_ms

    @property
    def last_ts(self) -> int:
        """Event time of the last member."""
        return self.members[-1].timestamp_ms

    @property
    def opener(self) -> Member:
        """The member read first (smallest offset): where a replay must start for it."""
        return min(self.members, key=lambda member: member.offset)

    def accepts(self, member: Member, timing: Timing) -> bool:
        """Return True if `member`, sorting after the last member, continues this session."""
        tail = self.members[-1]
        if tail.is_end or member.timestamp_ms - tail.timestamp_ms > timing.timeout_ms:
            return False
        limit = timing.max_duration_ms
        return limit is None or member.timestamp_ms - self.first_ts < limit

    def append(self, member: Member) -> None:
        """Add a member that sorts after the last one."""
        self.members.append(member)
        self.first_offset = min(self.first_offset, member.offset)
        self.last_offset = max(self.last_offset, member.offset)

    def insert_inside(self, member: Member) -> None:
        """Add a non-END member, read last, whose event time is in [first_ts, last_ts)."""
        # Between two neighbours no gap grows, the END (always last) stays last and the
        # span is unchanged: the session's boundaries and deadline cannot move.
        bisect.insort(self.members, member, key=_order)
        self.last_offset = member.offset

    def deadline(self, timing: Timing) -> int:
        """Return the smallest `stream time - grace` at which nothing can join this session."""
        last = self.last_ts
        # A fragment at last_ts + timeout would still join; an END takes nothing after it
        # (a fragment with the same event time sorts after it by offset).
        deadline = last if self.members[-1].is_end else last + timing.timeout_ms + 1
        if timing.max_duration_ms is not None:
            deadline = min(deadline, self.first_ts + timing.max_duration_ms)
        return deadline


class KeyTimeline:
    """The open sessions of one key, in event-time order."""

    __slots__ = ("key", "segments")

    def __init__(self, key: str) -> None:
        self.key = key
        self.segments: list[Segment] = []

    def insert(self, member: Member, timing: Timing) -> tuple[list[Segment], list[Segment]]:
        """Add an on-time member; return the (replaced, new) segments the tracker must know of."""
        segments = self.segments
        # Its offset is the largest yet, so an event time >= the last one sorts it last.
        if not segments or member.timestamp_ms >= segments[-1].last_ts:
            # The common case: only the last session can change.
            if segments and segments[-1].accepts(member, timing):
                segments[-1].append(member)
                return [], []
            segments.append(Segment(member))
            return [], [segments[-1]]
        if not member.is_end:
            for segment in reversed(segments):
                if member.timestamp_ms >= segment.first_ts:
                    if member.timestamp_ms < segment.last_ts:
                        segment.insert_inside(member)
                        return [], []
                    break  # between two sessions: it may extend or bridge them
        # Otherwise the member may extend, bridge (merge) or split (END) sessions.
        # Re-splitting the key's pending members from scratch is simple and exact; it
        # equals the full batch split because every emitted session was final.
        members = sorted([m for seg in segments for m in seg.members] + [member], key=_order)
        self.segments = split(members, timing)
        return segments, self.segments

    def pop_final(self, watermark: int, timing: Timing) -> list[Segment]:
        """Remove and return the leading sessions whose deadline is <= `watermark`."""
        count = 0
        while count < len(self.segments) and self.segments[count].deadline(timing) <= watermark:
            count += 1
        final, self.segments = self.segments[:count], self.segments[count:]
        return final

    def remove(self, first_offset: int) -> Segment:
        """Remove and return the open session whose first offset is `first_offset` (truncation)."""
        # The others keep their members and boundaries; their deadlines still never decrease.
        for index, segment in enumerate(self.segments):
            if segment.first_offset == first_offset:
                return self.segments.pop(index)
        raise KeyError(f"key {self.key!r}: no open session starts at offset {first_offset}")

    def pop_all(self) -> list[Segment]:
        """Remove and return every open session (end of input)."""
        final, self.segments = self.segments, []
        return final

    def next_deadline(self, timing: Timing) -> int | None:
        """Return the deadline of the first open session, or None if there is none."""
        return self.segments[0].deadline(timing) if self.segments else None


def _order(member: Member) -> tuple[int, int]:
    return member.timestamp_ms, member.offset


def split(members: list[Member], timing: Timing) -> list[Segment]:
    """Split members sorted by (event time, offset) into sessions."""
    segments: list[Segment] = []
    for member in members:
        if segments and segments[-1].accepts(member, timing):
            segments[-1].append(member)
        else:
            segments.append(Segment(member))
    return segments
