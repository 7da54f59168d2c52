"""The open sessions of one key: a folded prefix each, and raw fragments inside the grace window.

The split rule is the batch definition (`sessionizer.reference`): walking a key's
fragments sorted by (event time, offset), a fragment starts a new session when
the previous one was an END fragment, when it is more than `timeout` after the
previous one, or when it is `max_session_duration` or more after the session's
first one.  A session is *final* once no fragment that can still arrive on time
(event time >= stream time - grace) could join it; `Segment.deadline` is the
smallest `stream time - grace` at which that holds.  Along a key, deadlines never
decrease, so sessions become final in event-time order.

Early folding.  Call `stream time - grace` the *fold line*.  A fragment that
arrives on time has an event time at or above the line and the largest offset
yet, so it sorts after every member below the line; and the greedy split decides
a member's session from the members before it alone.  So a member below the line
has its final place: the engine folds it into its session (the user's hooks) and
keeps of it only its offset (`sessionizer.segment.Segment.absorb`).  Only members at
or above the line stay raw (`Member`), and an insertion re-splits only raw members: every member
after the insertion point sorts after the new one, hence is above the line too.
Each session's folded members are a prefix of it, in event-time order.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Any

from mypy_extensions import mypyc_attr

from sessionizer.errors import SessionNotOpen
from sessionizer.segment import Member, Segment, SessionLimits

__all__ = [
    "KeyTimeline",
    "first_raw_ts",
    "next_deadline",
    "place",
    "pop_final",
    "split",
]


@mypyc_attr(native_class=False)  # compiled (SESSIONIZER_HOT_PATH): a list subclass stays a
class KeyTimeline(list[Segment]):  # Python class, which mypyc allows only as non-native
    """The open sessions of one key, in event-time order (itself the list: one object less
    per open key)."""

    __slots__ = ("deadline_due", "fold_due", "key")

    def __init__(self, key: str) -> None:
        # No `super().__init__()`: `list.__new__` made it empty, and compiled, the call
        # was a third of a new key's cost (benchmarks/HOT_PATH.md, round 11).
        self.key = key
        # The engine's schedule (here, not in dicts of its own: less memory per key).
        # Its queues (`sessionizer.due_queue`) hold keys by due time with lazy deletion:
        # an entry counts while its time equals the key's `*_due`; one may fire early,
        # the key is then rescheduled.
        self.deadline_due: int | None = None
        """When `stream time - grace` reaches the first session's deadline (at the latest)."""
        self.fold_due: int | None = None
        """When the line is above the first raw member (at the latest)."""

    def take(self, first_offset: int) -> Segment:
        """Remove and return the open session whose first offset is `first_offset` (truncation)."""
        # The others keep their members and boundaries; their deadlines still never decrease.
        for index, segment in enumerate(self):
            if segment.first_offset == first_offset:
                return self.pop(index)
        raise SessionNotOpen(f"key {self.key!r}: no open session starts at offset {first_offset}")

    def pop_all(self) -> list[Segment]:
        """Remove and return every open session (end of input)."""
        final = self[:]
        self.clear()
        return final

    def opened_before(self, first_offset: int) -> int | None:
        """The stream time before the first-read record of the session at `first_offset`."""
        for segment in self:
            if segment.first_offset == first_offset:
                return segment.opener()[1]
        raise SessionNotOpen(f"key {self.key!r}: no open session starts at offset {first_offset}")

    def export_state(self, dump: Callable[[Any], bytes]) -> list[Any]:
        """The key's open sessions and schedule as msgpack-able data, for a handover."""
        sessions = [segment.export_state(dump) for segment in self]
        return [self.key, self.deadline_due, self.fold_due, sessions]

    @classmethod
    def restore_state(cls, data: Sequence[Any], load: Callable[[bytes], Any]) -> KeyTimeline:
        """Rebuild a key's timeline from `export_state`'s data."""
        key, deadline_due, fold_due, sessions = data
        timeline = cls(key)
        timeline.deadline_due, timeline.fold_due = deadline_due, fold_due
        timeline.extend(Segment.restore_state(item, load, key) for item in sessions)
        return timeline


# The engine's per-record work on a timeline is in functions, not methods: a list
# subclass is a Python class even compiled, and a call to its method goes through
# Python's method lookup and argument parsing, where a compiled function is called
# directly (benchmarks/HOT_PATH.md, round 8).  They index it as the `list` it is
# (`segments`): compiled, indexing a `KeyTimeline` goes through `PyObject_GetItem` and
# its `append` through a method call, a `list` is indexed and appended to in place
# (round 10).


def place(
    timeline: KeyTimeline, member: Member, limits: SessionLimits
) -> tuple[list[int], list[Segment]] | None:
    """Add an on-time member; return the first offsets of the sessions it replaced, and
    the new sessions (the tracker must know of both).

    None: the member was appended after a raw member, and is no END; then neither
    the first deadline (it only moves later) nor the next member to fold moved.
    """
    segments: list[Segment] = timeline
    # Its offset is the largest yet, so an event time >= the last one sorts it last.
    if not segments or member[0] >= segments[-1].last_ts:
        # The common case: only the last session can change.
        if segments:
            last = segments[-1]
            if last.accepts(member, limits):
                quiet = bool(last.raw) and not member[2]
                last.append(member)
                return None if quiet else ([], [])
            added = Segment(member)
            segments.append(added)
            return [], [added]
        # A new key's first session (most keys have one): list.__init__ over a sized
        # iterable allocates exactly one slot, where append allocates four.
        added = Segment(member)
        list.__init__(timeline, (added,))
        return [], [added]
    # The last session that starts before it: it may join it, or split it (an END).
    index = len(segments) - 1
    while index >= 0 and segments[index].first_ts > member[0]:
        index -= 1
    if index >= 0 and not member[2] and member[0] < segments[index].last_ts:
        segments[index].insert_inside(member)
        return [], []
    return _resplit(timeline, max(index, 0), index >= 0, member, limits)


def _resplit(
    timeline: KeyTimeline, index: int, keep: bool, member: Member, limits: SessionLimits
) -> tuple[list[int], list[Segment]]:
    """Re-split the raw members from `member` on: it may extend, bridge (merge) or split
    (END) sessions.  `keep`: segment `index` starts before it and keeps its prefix."""
    old = timeline[index:]
    dropped = [segment.first_offset for segment in old]
    rest = [member]
    if keep:
        head = old[0]
        rest += head.cut(bisect.bisect(head.raw, member))
        old = old[1:]
    for segment in old:
        # Each starts after `member`, which is on time: nothing of it is folded.
        assert not segment.folded, "a session after an on-time member has folded members"
        rest += segment.raw
    added = split(rest, limits, [head] if keep else [])
    timeline[index:] = added
    return dropped, added


def first_raw_ts(timeline: KeyTimeline) -> int | None:
    """Return the event time of the key's first raw member (the next to fold), if any."""
    segments: list[Segment] = timeline
    for segment in segments:
        if segment.raw:
            return segment.raw[0][0]
    return None


def pop_final(timeline: KeyTimeline, watermark: int, limits: SessionLimits) -> list[Segment]:
    """Remove and return the leading sessions whose deadline is <= `watermark`."""
    segments: list[Segment] = timeline
    count = 0
    while count < len(segments) and segments[count].deadline(limits) <= watermark:
        count += 1
    final = segments[:count]
    del segments[:count]
    return final


def next_deadline(timeline: KeyTimeline, limits: SessionLimits) -> int | None:
    """Return the deadline of the first open session, or None if there is none."""
    segments: list[Segment] = timeline
    return segments[0].deadline(limits) if segments else None


def split(
    members: list[Member], limits: SessionLimits, start: list[Segment] | None = None
) -> list[Segment]:
    """Split members sorted by (event time, offset) into sessions, continuing `start`'s last."""
    segments = start if start is not None else []
    for member in members:
        if segments and segments[-1].accepts(member, limits):
            segments[-1].append(member)
        else:
            segments.append(Segment(member))
    return segments
