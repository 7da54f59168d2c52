"""`SafeOffsetTracker`: where a new owner may resume a stream, and what it must skip.

The thesis's section 4.3 (Figure 4.3), with the ignore list made exact::

    safe_offset = min(first offset of open sessions)  if any are open
                = next offset                           otherwise
    ignore      = finished sessions with last_offset >= safe_offset

A replay from `safe_offset` meets again every fragment of the sessions in the
ignore list that lies at or after the safe offset; it skips exactly those (by
key, event-time span and offset), so a new session of the same key is never
skipped.  Pure bookkeeping: no I/O, no clock.

Besides open sessions, a record the engine has *parked* (dated too far ahead,
waiting for the next record to confirm it) holds the safe offset back: a replay
must meet it again to decide about it the same way.  So does any offset a caller
`hold`s (a live resize's forwarded fragments); `release_past` lets such a hold go
only once nothing else holds the safe offset at or before a bound, so a replay
never starts between the held record and the bound (a resize target's repeated
forwards, docs/resize.md).

`ignore_bytes()` is an upper bound of the encoded ignore list that depends only on
what was read, never on when commits happened: the engine compares it with
`IGNORE_LIST_BUDGET_BYTES` after every record (`over_budget`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from heapq import heapify, heappop, heappush  # not `heapq.`: compiled, a module lookup per call
from typing import Any, Final

from state.record import IgnoreEntry

__all__ = [
    "ENTRY_OVERHEAD_BYTES",
    "IGNORE_LIST_BUDGET_BYTES",
    "OpenedBefore",
    "SafeOffsetTracker",
    "entry_bytes",
]

IGNORE_LIST_BUDGET_BYTES: Final = 512 * 1024
"""Largest encoded ignore list the engine lets a stream reach (uncompressed, msgpack).

Half of `state.record.DEFAULT_LIMIT_BYTES` (1,000,000) and then some: the rest of the
record (names, offsets, the small user blob) fits in what is left, even uncompressed.
"""
ENTRY_OVERHEAD_BYTES: Final = 40
"""Most msgpack bytes an ignore entry takes besides its key's UTF-8 bytes.

A 5-element array header (1), a str header (at most 3 for keys up to 64 KiB) and four
integers of at most 9 bytes each.
"""

OpenedBefore = Callable[[int, str], int | None]
"""(first offset, key) of an open session -> the stream time before its first record was
read.  The engine's session keeps it (`Segment.opener`); the tracker asks rather than
hold a copy of it per open session."""

# Finished entries are pruned lazily, when their number has doubled since the last
# prune (plus this slack), so pruning costs O(1) amortized per finished session.
_PRUNE_SLACK = 1024


def entry_bytes(entry: IgnoreEntry) -> int:
    """Return an upper bound of the msgpack bytes one ignore entry takes."""
    return len(entry.key.encode("utf-8")) + ENTRY_OVERHEAD_BYTES


class SafeOffsetTracker:
    """Tracks the open and finished sessions of one stream to compute its resume point."""

    def __init__(
        self,
        *,
        next_offset: int = 0,
        stream_time_ms: int | None = None,
        ignore: Iterable[IgnoreEntry] = (),
    ) -> None:
        self._next_offset = next_offset
        self._stream_time_ms = stream_time_ms
        # Open sessions: first offset -> key (the stream time before it: `OpenedBefore`).
        self._open: dict[int, str] = {}
        # Parked records: offset -> stream time when they were read.
        self._held: dict[int, int | None] = {}
        # Held offsets that go once no other holder is at or before the bound: held -> bound.
        self._bounds: dict[int, int] = {}
        # Held offsets with more than one holder (a forwarded fragment parked at the offset
        # its resize holds, docs/resize.md): held -> holders beyond the first.
        self._shared: dict[int, int] = {}
        # Min-heap of the offsets in `_open` and `_held`, with lazy deletion (an offset
        # counts while it is in one of them), so the safe offset is cheap per record.
        self._holders: list[int] = []
        # Min-heap of (last_offset, bytes) of every finished entry not yet below the
        # safe offset, and their sum: `ignore_bytes()`.
        self._entry_heap: list[tuple[int, int]] = []
        self._entry_bytes = 0
        self._finished: dict[str, list[IgnoreEntry]] = {}
        self._finished_count = 0
        # Only the resumed ignore list can match a fragment still to come: a session
        # finished here lies wholly before the next offset.  Kept apart, so a live
        # stream's check is one empty-dict lookup.
        self._skippable: dict[str, list[IgnoreEntry]] = {}
        for entry in ignore:
            self._add_finished(entry)
            self._skippable.setdefault(entry.key, []).append(entry)
        self._prune_at = 2 * self._finished_count + _PRUNE_SLACK

    @property
    def next_offset(self) -> int:
        """Offset of the next record to read."""
        return self._next_offset

    @property
    def open_sessions(self) -> int:
        """Number of open sessions."""
        return len(self._open)

    @property
    def safe_offset(self) -> int:
        """Smallest first offset of the open sessions and parked records, else the next offset."""
        holder = self._oldest_holder()
        return self._next_offset if holder is None else holder

    def stream_time_at_safe_offset(self, opened_before: OpenedBefore) -> int | None:
        """Stream time just before the record at the safe offset was processed."""
        holder = self._oldest_holder()
        if holder is None:
            return self._stream_time_ms
        key = self._open.get(holder)
        if key is not None:
            return opened_before(holder, key)
        return self._held[holder]

    def oldest_open(self) -> tuple[int, str] | None:
        """Return (first offset, key) of the open session at the safe offset, if one is there."""
        holder = self._oldest_holder()
        if holder is None or holder not in self._open:
            return None  # nothing open, or a parked record holds the safe offset
        return holder, self._open[holder]

    def ignore_bytes(self) -> int:
        """Return an upper bound of the encoded ignore list (entries at or after the safe offset).

        Exactly the sum of `entry_bytes` over the finished sessions with `last_offset >=
        safe_offset`: a function of the records read so far, whatever was committed.
        """
        safe = self.safe_offset
        heap = self._entry_heap
        while heap and heap[0][0] < safe:
            self._entry_bytes -= heappop(heap)[1]
        return self._entry_bytes

    def over_budget(self, budget: int) -> bool:
        """Return `ignore_bytes() > budget`, without finding the safe offset when it cannot be.

        The engine asks after every record. The sum before pruning bounds `ignore_bytes()`
        from above, so while it is within `budget` the answer is no, and the per-record
        cost is one comparison instead of the safe offset's heap walk (benchmarks/HOT_PATH.md,
        round 12). A bounded hold (a resize target's) is let go while the safe offset is
        found, so with one waiting the safe offset is still found after every record: a
        replay lets go at the same record.
        """
        if self._entry_bytes <= budget and not self._bounds:
            return False
        return self.ignore_bytes() > budget

    def advance(self, next_offset: int, stream_time_ms: int | None) -> None:
        """Record that every record before `next_offset` has been processed."""
        self._next_offset = max(self._next_offset, next_offset)
        self._stream_time_ms = stream_time_ms

    def session_opened(self, key: str, first_offset: int) -> None:
        """Register an open session whose earliest-read fragment is at `first_offset`."""
        self._open[first_offset] = key
        self._push_holder(first_offset)

    def session_dropped(self, first_offset: int) -> None:
        """Forget an open session that was merged or re-split (its fragments live on)."""
        del self._open[first_offset]

    def hold(self, offset: int, stream_time_before: int | None) -> None:
        """Hold the safe offset at a parked record (read when stream time was as given); each
        hold of an offset is released once."""
        if offset in self._held:  # a second holder of the record: the same stream time
            self._shared[offset] = self._shared.get(offset, 0) + 1
            return
        self._held[offset] = stream_time_before
        self._push_holder(offset)

    def release(self, offset: int) -> None:
        """Stop holding the safe offset at a parked record: it was applied or rejected."""
        others = self._shared.pop(offset, 0)
        if others:  # a bound set by `release_past` waits for the last holder
            if others > 1:
                self._shared[offset] = others - 1
            return
        del self._held[offset]
        self._bounds.pop(offset, None)

    def release_past(self, offset: int, bound: int) -> None:
        """Release the held `offset` once no other holder is at or before `bound` (< next offset).

        Until then the safe offset stays at or before `offset`, never inside
        (`offset`, `bound`].  Once let go it stays released: whatever opens later
        opens past the records already read, and so past `bound`.
        """
        if offset in self._held:
            self._bounds[offset] = max(bound, self._bounds.get(offset, bound))

    def session_finished(self, first_offset: int, entry: IgnoreEntry) -> None:
        """Move the open session at `first_offset` to the finished ones."""
        del self._open[first_offset]
        self._add_finished(entry)
        if self._finished_count >= self._prune_at:
            self.prune()

    def should_skip(self, key: str, offset: int, timestamp_ms: int) -> bool:
        """Return True if the fragment belongs to a finished session (a replay meets it again)."""
        entries = self._skippable.get(key)
        return entries is not None and any(e.covers(offset, timestamp_ms) for e in entries)

    def ignore_list(self) -> tuple[IgnoreEntry, ...]:
        """Return the finished sessions with `last_offset >= safe_offset`, by last offset."""
        self.prune()
        entries = [entry for group in self._finished.values() for entry in group]
        return tuple(sorted(entries, key=lambda e: (e.last_offset, e.key)))

    def prune(self) -> None:
        """Drop the finished sessions that lie wholly before the safe offset."""
        safe = self.safe_offset
        self._finished = _entries_from(self._finished, safe)
        self._skippable = _entries_from(self._skippable, safe)
        self._finished_count = sum(len(group) for group in self._finished.values())
        self._prune_at = 2 * self._finished_count + _PRUNE_SLACK
        # `over_budget` leaves the sum's entries alone while it is within budget: they go
        # here, on the same schedule, so they never outnumber the finished entries kept
        # (filtered and re-heaped: popping them one by one costs a log factor more).
        kept = [item for item in self._entry_heap if item[0] >= safe]
        heapify(kept)
        self._entry_heap = kept
        self._entry_bytes = sum(cost for _, cost in kept)

    def export_state(self, opened_before: OpenedBefore) -> list[Any]:
        """Everything the tracker holds, as msgpack-able data (a handover, DESIGN section 5).

        Every attribute is carried as it is (heaps in their order), so a tracker
        restored from it decides exactly as this one would.  Each open session carries
        the stream time before it (checked against its session's; not kept here).
        """
        return [
            [self._next_offset, self._stream_time_ms],
            [[offset, key, opened_before(offset, key)] for offset, key in self._open.items()],
            [[offset, time] for offset, time in self._held.items()],
            list(self._holders),
            [list(item) for item in self._entry_heap],
            self._entry_bytes,
            [[entry.to_list() for entry in group] for group in self._finished.values()],
            [[entry.to_list() for entry in group] for group in self._skippable.values()],
            [self._finished_count, self._prune_at],
            # Only while a bounded or shared hold waits (a resize target, which replays rather
            # than hands over): every other export keeps the nine parts it always had.
            *(
                [[[held, bound] for held, bound in self._bounds.items()]]
                if self._bounds or self._shared
                else []
            ),
            *([[[held, others] for held, others in self._shared.items()]] if self._shared else []),
        ]

    @classmethod
    def restore_state(cls, data: Sequence[Any]) -> SafeOffsetTracker:
        """Rebuild a tracker from `export_state`'s data."""
        (next_offset, stream_time), opened, held, holders, heap, entry_bytes = data[:6]
        finished, skippable, (finished_count, prune_at) = data[6:9]
        tracker = cls(next_offset=next_offset, stream_time_ms=stream_time)
        tracker._open = {offset: key for offset, key, _ in opened}
        tracker._held = {offset: time for offset, time in held}
        tracker._holders = list(holders)
        tracker._entry_heap = [(offset, cost) for offset, cost in heap]
        tracker._entry_bytes = entry_bytes
        tracker._finished = _groups(finished)
        tracker._skippable = _groups(skippable)
        tracker._finished_count, tracker._prune_at = finished_count, prune_at
        tracker._bounds = {held: bound for held, bound in data[9]} if len(data) > 9 else {}
        tracker._shared = {held: others for held, others in data[10]} if len(data) > 10 else {}
        return tracker

    def _add_finished(self, entry: IgnoreEntry) -> None:
        self._finished.setdefault(entry.key, []).append(entry)
        self._finished_count += 1
        size = entry_bytes(entry)
        heappush(self._entry_heap, (entry.last_offset, size))
        self._entry_bytes += size

    def _push_holder(self, offset: int) -> None:
        heappush(self._holders, offset)
        # Re-splits push an offset again and again; rebuild before stale ones pile up.
        if len(self._holders) > 2 * (len(self._open) + len(self._held)) + _PRUNE_SLACK:
            self._holders = sorted({*self._open, *self._held})

    def _oldest_holder(self) -> int | None:
        heap = self._holders
        while heap and heap[0] not in self._open and heap[0] not in self._held:
            heappop(heap)
        if self._bounds and heap and heap[0] in self._bounds:
            return self._past_bounds()
        return heap[0] if heap else None

    def _past_bounds(self) -> int | None:
        """The oldest holder, after letting go of bounded holds no other holder keeps.

        Read after every record (`ignore_bytes`), so a replay of the same records lets
        go at the same record.
        """
        heap = self._holders
        while heap:
            oldest = heap[0]
            if oldest not in self._open and oldest not in self._held:
                heappop(heap)
                continue
            bound = self._bounds.get(oldest)
            if bound is None or oldest in self._shared:
                return oldest
            others = (o for o in (*self._open, *self._held) if o != oldest)
            if min(others, default=self._next_offset) <= bound:
                return oldest
            del self._held[oldest], self._bounds[oldest]
            heappop(heap)
        return None


def _groups(data: Sequence[Sequence[Sequence[Any]]]) -> dict[str, list[IgnoreEntry]]:
    """Entries grouped by key, from their stored lists (as `export_state` wrote them)."""
    groups: dict[str, list[IgnoreEntry]] = {}
    for group in data:
        entries = [IgnoreEntry(*item) for item in group]
        if entries:
            groups[entries[0].key] = entries
    return groups


def _entries_from(groups: dict[str, list[IgnoreEntry]], safe: int) -> dict[str, list[IgnoreEntry]]:
    """Return the entries with `last_offset >= safe`, grouped by key (no empty groups)."""
    kept: dict[str, list[IgnoreEntry]] = {}
    for key, group in groups.items():
        alive = [entry for entry in group if entry.last_offset >= safe]
        if alive:
            kept[key] = alive
    return kept
