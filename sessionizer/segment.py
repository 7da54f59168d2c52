"""One open session of a key: its folded prefix (the user's state, the offsets) and its raw members.

Early folding (`sessionizer.timeline`) turns a raw member into a folded one
(`Segment.absorb`): of it the session keeps only its offset, as a zigzag varint of
its difference to the previous one, and what the split rule and the tracker need
(the last member's time, offset and END flag; the earliest-read member's offset and
stream time, where a replay must start).  A handover carries every slot
(`Segment.export_state`, `Segment.restore_state`).
"""

from __future__ import annotations

from bisect import insort  # not `bisect.`: compiled, a module lookup per call
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

from framework.kernel.fragment import Fragment
from sessionizer.processor import Timing

__all__ = ["Failure", "Member", "Segment", "SessionLimits"]

Member: TypeAlias = tuple[int, int, bool, int | None, Fragment]
"""A raw fragment of an open session: (event time, offset, is_end, stream time before
it was read, the fragment as decoded).  A tuple that sorts by (event time, offset) as
the split rule wants (offsets are unique, so the comparison never reaches the fragment)."""


_SHORT_OFFSETS: Final = 24
"""Folded offsets are kept in an immutable `bytes` below this many bytes (see `Segment`)."""
_BYTE: Final = tuple(bytes((value,)) for value in range(0x80))
_NO_FRAGMENT: Final = Fragment(0, "", 0, {})  # the placeholder of a session restored empty


class SessionLimits:
    """A processor's two limits on a session (`Timing.timeout_ms`, `max_duration_ms`).

    Read for every record; compiled, fields of this class are native, where reading a
    `Timing` (a Python dataclass) is a lookup by name (benchmarks/HOT_PATH.md, round 11).
    """

    __slots__ = ("max_duration_ms", "timeout_ms")

    def __init__(self, timing: Timing) -> None:
        self.timeout_ms: Final[int] = timing.timeout_ms
        self.max_duration_ms: Final[int | None] = timing.max_duration_ms


@dataclass(frozen=True, slots=True)
class Failure:
    """A fold hook of a session failed: the whole session goes to the dead letters."""

    hook: str
    error: str
    fragment: Fragment | None = None
    """The fragment it failed on (its bytes are kept for its dead letter), if any."""
    traceback: str = field(default="", compare=False, repr=False)
    """Where the hook raised (diagnostics only: a handover does not carry it)."""


class Segment:
    """One open session: its folded prefix (hook state, offsets) and its raw members."""

    __slots__ = (
        "failure",
        "first_offset",
        "first_ts",
        "folded",
        "last_offset",
        "offsets",
        "opener_offset",
        "opener_time",
        "raw",
        "state",
        "tail_end",
        "tail_offset",
        "tail_ts",
    )

    def __init__(self, first: Member) -> None:
        # The raw members; an empty tuple, not a list, once none is left (56 bytes less).
        self.raw: list[Member] | tuple[Member, ...] = [first]
        self.first_ts = first[0]
        self.first_offset = self.last_offset = first[1]
        # The folded prefix: how many members, the last one, the earliest-read one
        # (offset and stream time before it: where a replay must start), its offsets
        # in event-time order, and the user's session object (or why it failed).
        self.folded = 0
        self.tail_ts = self.tail_offset = 0
        self.tail_end = False
        self.opener_offset = 0
        self.opener_time: int | None = None
        # Immutable bytes while short (a 40-byte block against bytearray's two, 70 bytes):
        # most sessions are a few members; past `_SHORT_OFFSETS` a bytearray grows in place.
        self.offsets: bytes | bytearray = b""
        self.state: Any = None
        self.failure: Failure | None = None

    @property
    def fragments(self) -> int:
        """Number of members, folded and raw."""
        return self.folded + len(self.raw)

    @property
    def last_ts(self) -> int:
        """Event time of the last member."""
        return self.raw[-1][0] if self.raw else self.tail_ts

    @property
    def last_in_order(self) -> int:
        """Offset of the last member in event-time order."""
        return self.raw[-1][1] if self.raw else self.tail_offset

    def ends(self) -> bool:
        """Return True if the last member is an END fragment."""
        return self.raw[-1][2] if self.raw else self.tail_end

    def opener(self) -> tuple[int, int | None]:
        """(offset, stream time before it) of the member read first: where a replay must start."""
        best = (self.opener_offset, self.opener_time) if self.folded else None
        for member in self.raw:
            if best is None or member[1] < best[0]:
                best = (member[1], member[3])
        assert best is not None  # a segment is never empty
        return best

    def accepts(self, member: Member, limits: SessionLimits) -> bool:
        """Return True if `member`, sorting after the last member, continues this session."""
        if self.ends() or member[0] - self.last_ts > limits.timeout_ms:
            return False
        limit = limits.max_duration_ms
        return limit is None or member[0] - self.first_ts < limit

    def append(self, member: Member) -> None:
        """Add a member that sorts after the last one."""
        if isinstance(self.raw, list):
            self.raw.append(member)
        else:
            self.raw = [member]
        offset = member[1]
        if offset > self.last_offset:
            self.last_offset = offset
        elif offset < self.first_offset:  # a re-split appends in event-time order
            self.first_offset = offset

    def insert_inside(self, member: Member) -> None:
        """Add a non-END member, read last, whose event time is in [first_ts, last_ts)."""
        # Between two neighbours no gap grows, the END (always last) stays last and the
        # span is unchanged: the session's boundaries and deadline cannot move.  It is on
        # time, so it sorts after every folded member: among the raw ones.
        assert isinstance(self.raw, list)  # it sorts before the last member: a raw one
        insort(self.raw, member)
        self.last_offset = member[1]

    def deadline(self, limits: SessionLimits) -> int:
        """Return the smallest `stream time - grace` at which nothing can join this session."""
        last = self.last_ts
        # A fragment at last_ts + timeout would still join; an END takes nothing after it
        # (a fragment with the same event time sorts after it by offset).
        deadline = last if self.ends() else last + limits.timeout_ms + 1
        limit = limits.max_duration_ms
        if limit is not None:
            deadline = min(deadline, self.first_ts + limit)
        return deadline

    def absorb(self, member: Member) -> None:
        """Count the first raw member as folded (the caller ran the hooks, and drops it from
        `raw`): keep its offset, and what the split rule and the tracker need of it."""
        timestamp, offset, is_end, before = member[0], member[1], member[2], member[3]
        # The offset as a zigzag varint of its difference to the previous one: 1 byte
        # below 64, 2 below 8,192...  (inline: this runs for every fragment).
        delta = offset - self.tail_offset if self.folded else offset
        value = delta << 1 if delta >= 0 else (-delta << 1) - 1
        if len(self.offsets) < _SHORT_OFFSETS:
            # bytes: a new small object; a bytearray (restored long) grows in place.
            self.offsets += _BYTE[value] if value < 0x80 else _varint(value)
        else:
            buffer = self.offsets
            if not isinstance(buffer, bytearray):
                buffer = self.offsets = bytearray(buffer)
            while value >= 0x80:
                buffer.append(value & 0x7F | 0x80)
                value >>= 7
            buffer.append(value)
        if not self.folded or offset < self.opener_offset:
            self.opener_offset, self.opener_time = offset, before
        self.folded += 1
        self.tail_ts, self.tail_offset, self.tail_end = timestamp, offset, is_end

    def folded_offsets(self) -> Iterator[int]:
        """Yield the offsets of the folded members, in event-time order."""
        offset = 0
        for index, delta in enumerate(_read_offsets(self.offsets)):
            offset = delta if index == 0 else offset + delta
            yield offset

    def cut(self, index: int) -> list[Member]:
        """Remove and return the raw members from `index` on (a re-split takes them)."""
        if index >= len(self.raw):
            return []
        moved, kept = list(self.raw[index:]), self.raw[:index]
        self.raw = kept if kept else ()
        offsets = [member[1] for member in self.raw]
        if self.folded:
            offsets += [self.opener_offset, max(self.folded_offsets())]
        self.first_offset, self.last_offset = min(offsets), max(offsets)
        return moved

    def export_state(self, dump: Callable[[Any], bytes]) -> list[Any]:
        """This session as msgpack-able data, for a handover (`sessionizer.handover`).

        `dump` packs the user's session object.  Every slot is carried: a slot added
        to `Segment` must be added here and in `restore_state`.
        """
        failure = None
        if self.failure is not None:
            held = self.failure.fragment
            fragment = (
                None if held is None else [held.offset, held.key, held.timestamp_ms, held.value]
            )
            failure = [self.failure.hook, self.failure.error, fragment]
        state = dump(self.state) if self.folded and self.failure is None else None
        return [
            # The handover document keeps its format: (event time, offset, is_end, stream
            # time before, record timestamp, fields); the key is the timeline's.
            [[*member[:4], member[4].timestamp_ms, member[4].value] for member in self.raw],
            isinstance(self.raw, list),
            [self.first_ts, self.first_offset, self.last_offset, self.folded],
            [self.tail_ts, self.tail_offset, self.tail_end, self.opener_offset, self.opener_time],
            bytes(self.offsets),
            state,
            failure,
        ]

    @classmethod
    def moved(
        cls,
        head: tuple[int, int, int, bool],
        at: tuple[int, int | None],
        members: Sequence[Member],
        state: Any = None,
        failure: Failure | None = None,
    ) -> Segment:
        """A session moved from another stream (docs/resize.md), in this stream's offsets.

        `head` is (first_ts, folded count, tail_ts, tail_end) of its folded part, which
        stands at offset `at[0]` (read when stream time was `at[1]`); `members` are its raw
        fragments, at their own offsets here, in event-time order.
        """
        first_ts, folded, tail_ts, tail_end = head
        if not folded:
            segment = cls(members[0])
            for member in members[1:]:
                segment.append(member)
            segment.failure = failure
            return segment
        offset, before = at
        segment = cls((0, offset, False, before, _NO_FRAGMENT))
        segment.raw = list(members) if members else ()
        segment.first_ts, segment.folded, segment.state, segment.failure = (
            first_ts, folded, state, failure,
        )  # fmt: skip
        # Every folded fragment stands at the head's offset: deltas of 0 after the first.
        offsets = _varint(offset << 1) + bytes(folded - 1)
        segment.offsets = offsets if len(offsets) < _SHORT_OFFSETS else bytearray(offsets)
        segment.tail_ts, segment.tail_offset, segment.tail_end = tail_ts, offset, tail_end
        segment.opener_offset, segment.opener_time = offset, before
        segment.rebound()
        return segment

    def rebound(self) -> None:
        """Recompute the first and last offsets from the members (after held ones joined)."""
        offsets = [member[1] for member in self.raw]
        if self.folded:
            folded = list(self.folded_offsets())
            offsets += [min(folded), max(folded)]
        self.first_offset, self.last_offset = min(offsets), max(offsets)

    @classmethod
    def restore_state(
        cls, data: Sequence[Any], load: Callable[[bytes], Any], key: str = ""
    ) -> Segment:
        """Rebuild a session of `key` from `export_state`'s data; `load` unpacks the user's
        session."""
        raw, is_list, (first_ts, first_offset, last_offset, folded), tail, offsets = data[:5]
        state, failure = data[5:]
        members = [_member(item, key) for item in raw]
        segment = cls(members[0]) if members else cls((0, 0, False, None, _NO_FRAGMENT))
        segment.raw = members if is_list else tuple(members)
        segment.first_ts, segment.first_offset, segment.last_offset = (
            first_ts,
            first_offset,
            last_offset,
        )
        segment.folded = folded
        segment.tail_ts, segment.tail_offset, segment.tail_end = tail[0], tail[1], tail[2]
        segment.opener_offset, segment.opener_time = tail[3], tail[4]
        segment.offsets = bytes(offsets) if len(offsets) < _SHORT_OFFSETS else bytearray(offsets)
        segment.state = load(state) if state is not None else None
        if failure is not None:
            hook, error, held = failure
            fragment = None if held is None else Fragment(held[0], held[1], held[2], held[3])
            segment.failure = Failure(hook, error, fragment)
        return segment


def _member(item: Sequence[Any], key: str) -> Member:
    """A raw member of `key` from its handover form (a list: msgpack has no tuples)."""
    event_time, offset, is_end, before, record_ts, value = item
    return (event_time, offset, is_end, before, Fragment(offset, key, record_ts, value))


def _varint(value: int) -> bytes:
    """The varint bytes of a non-negative int, as `Segment.absorb` writes them."""
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_offsets(buffer: bytes | bytearray) -> Iterator[int]:
    """Yield the deltas `Segment.absorb` wrote."""
    value = shift = 0
    for byte in buffer:
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            yield value >> 1 if not value & 1 else -((value + 1) >> 1)
            value = shift = 0
