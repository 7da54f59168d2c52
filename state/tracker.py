"""`SafeOffsetTracker`: where a new owner may resume a stream, and what it must skip.

The thesis's section 4.3 (Figure 4.3), with the ignore list made exact::

    safe_offset = min(first offset of open sessions)  if any are open
                = next offset                           otherwise
    ignore      = finished sessions with last_offset >= safe_offset

A replay from `safe_offset` meets again every fragment of the sessions in the
ignore list that lies at or after the safe offset; it skips exactly those (by
key, event-time span and offset), so a new session of the same key is never
skipped.  Pure bookkeeping: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from state.record import IgnoreEntry

__all__ = ["SafeOffsetTracker"]

# Finished entries are pruned lazily, when their number has doubled since the last
# prune (plus this slack), so pruning costs O(1) amortized per finished session.
_PRUNE_SLACK = 1024


@dataclass(frozen=True, slots=True)
class _OpenSession:
    key: str
    stream_time_before: int | None


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
        self._open: dict[int, _OpenSession] = {}
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
        """Smallest first offset of the open sessions, else the next offset."""
        return min(self._open) if self._open else self._next_offset

    @property
    def stream_time_at_safe_offset(self) -> int | None:
        """Stream time just before the record at the safe offset was processed."""
        if not self._open:
            return self._stream_time_ms
        return self._open[min(self._open)].stream_time_before

    def advance(self, next_offset: int, stream_time_ms: int | None) -> None:
        """Record that every record before `next_offset` has been processed."""
        self._next_offset = max(self._next_offset, next_offset)
        self._stream_time_ms = stream_time_ms

    def session_opened(self, key: str, first_offset: int, stream_time_before: int | None) -> None:
        """Register an open session whose earliest-read fragment is at `first_offset`."""
        self._open[first_offset] = _OpenSession(key, stream_time_before)

    def session_dropped(self, first_offset: int) -> None:
        """Forget an open session that was merged or re-split (its fragments live on)."""
        del self._open[first_offset]

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

    def _add_finished(self, entry: IgnoreEntry) -> None:
        self._finished.setdefault(entry.key, []).append(entry)
        self._finished_count += 1


def _entries_from(groups: dict[str, list[IgnoreEntry]], safe: int) -> dict[str, list[IgnoreEntry]]:
    """Return the entries with `last_offset >= safe`, grouped by key (no empty groups)."""
    kept: dict[str, list[IgnoreEntry]] = {}
    for key, group in groups.items():
        alive = [entry for entry in group if entry.last_offset >= safe]
        if alive:
            kept[key] = alive
    return kept
