"""`DueQueue`: keys by the time they are due, at a few bytes per key (a calendar queue).

The engine looks at a key again when `stream time - grace` reaches the key's
`deadline_due` (or `fold_due`): one entry per open key.  A heap of `(time, key)`
tuples costs 72 bytes per entry (the tuple and its slot); here an entry is the
key alone in the list of its *slot* (`SLOT_MS` of due times, 8 bytes), and only
the slots the line has reached become a heap of `(time, key)` tuples, the *hot*
heap.  Entries are popped in `(time, key)` order, as from one heap.

Lazy deletion, as before: an entry counts while its time is the key's current due
time (`due_of`); the caller checks that for what `pop_due` returns, which is the
key's due time read when its slot turned hot (or the time `add` was given, for a
slot already hot).  A key listed twice in a slot yields the same entry twice: the
second no longer matches once the first was handled.

`earliest` is a lower bound of every entry's time, so that the engine calls
`pop_due` only when something may be due (once per record and queue, otherwise).
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappop, heappush  # not `heapq.`: compiled, a module lookup per call
from typing import Final

__all__ = ["SLOT_SHIFT", "DueQueue"]

SLOT_SHIFT: Final = 10
"""A slot is 2**10 ms (about one second) of due times."""
_BEFORE_ANY_SLOT: Final = -(1 << 62)
_NEVER: Final = 1 << 62


class DueQueue:
    """Keys by due time; `pop_due(line)` yields them in (time, key) order once due."""

    __slots__ = ("_due_of", "_hot", "_hot_slot", "_slot_ids", "_slots", "earliest")

    def __init__(self, due_of: Callable[[str], int | None]) -> None:
        self._due_of = due_of
        self._slots: dict[int, list[str]] = {}  # slot -> keys, for slots not yet hot
        self._slot_ids: list[int] = []  # a min-heap of `_slots`' keys
        self._hot: list[tuple[int, str]] = []  # a min-heap of the hot slots' entries
        self._hot_slot = _BEFORE_ANY_SLOT  # slots up to this one are hot
        self.earliest: int = _NEVER
        """No entry is due before this time (a lower bound)."""

    def add(self, due: int, key: str) -> None:
        """Look at `key` again once the line reaches `due`."""
        slot = due >> SLOT_SHIFT
        if slot <= self._hot_slot:
            heappush(self._hot, (due, key))
            if due < self.earliest:
                self.earliest = due
            return
        if slot << SLOT_SHIFT < self.earliest:
            self.earliest = slot << SLOT_SHIFT
        keys = self._slots.get(slot)
        if keys is None:
            self._slots[slot] = [key]
            heappush(self._slot_ids, slot)
        else:
            keys.append(key)

    def pop_due(self, line: int) -> tuple[int, str] | None:
        """The smallest (time, key) entry with time <= `line`, removed; None if none is due."""
        slot = line >> SLOT_SHIFT
        if slot > self._hot_slot:
            self._heat(slot)
        hot = self._hot
        entry = heappop(hot) if hot and hot[0][0] <= line else None
        earliest = hot[0][0] if hot else _NEVER
        if self._slot_ids and self._slot_ids[0] << SLOT_SHIFT < earliest:
            earliest = self._slot_ids[0] << SLOT_SHIFT
        self.earliest = earliest
        return entry

    def live(self) -> list[tuple[int, str]]:
        """The entries that still count, sorted (a heap: what a handover carries)."""
        due_of = self._due_of
        entries = {(due, key) for due, key in self._hot if due_of(key) == due}
        for slot, keys in self._slots.items():
            for key in keys:
                due = due_of(key)
                if due is not None and due >> SLOT_SHIFT == slot:
                    entries.add((due, key))
        return sorted(entries)

    def clear(self) -> None:
        """Forget every entry."""
        self._slots.clear()
        self._slot_ids.clear()
        self._hot.clear()
        self.earliest = _NEVER

    def _heat(self, up_to: int) -> None:
        """Turn the slots up to `up_to` into hot entries, at the keys' current due times."""
        slot_ids, due_of, hot = self._slot_ids, self._due_of, self._hot
        while slot_ids and slot_ids[0] <= up_to:
            slot = heappop(slot_ids)
            for key in self._slots.pop(slot):
                due = due_of(key)
                # A key whose due time lies in another slot has its entry there (or had:
                # it was handled, or is hot already).
                if due is not None and due >> SLOT_SHIFT == slot:
                    heappush(hot, (due, key))
        self._hot_slot = up_to
