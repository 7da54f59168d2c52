"""`EngineState`: what a `SessionEngine` holds beyond its committed `StreamState`.

The engine has two states.  `SessionEngine.snapshot(offset)` returns the
`StreamState` a commit stores: small, and enough to resume by replaying from the
safe offset.  `SessionEngine.export_state()` returns an `EngineState`: the rest
of what it holds (the open sessions with their folded state, the raw fragments
inside the grace window, the key timelines and their schedule, the tracker, the
producers' clocks, a parked record), which lets the next owner read on from the
committed offset instead (`SessionEngine.restore`, docs/sessions.md "Handover").
bytewax's window logic does the same: `snapshot()` returns a state dataclass
and `build(resume_state)` rebuilds the logic from it.

The engine owns both; `sessionizer.handover` only encodes an `EngineState` into
a document and back, `sessionizer.handover_check` checks a decoded document.

`CARRIED`, `REBUILT` and `PER_OWNER` name every engine attribute: a test fails
when the engine gains one that is in none of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from sessionizer.producer_clocks import ProducerClocks
from sessionizer.records import Record
from sessionizer.timeline import KeyTimeline
from state.tracker import SafeOffsetTracker

__all__ = ["CARRIED", "PER_OWNER", "REBUILT", "EngineState", "Parked"]


@dataclass(frozen=True, slots=True)
class Parked:
    """A record dated more than `max_lead` ahead, waiting for the next record's verdict."""

    record: Record
    event_time_ms: int
    stream_time_ms: int | None


@dataclass(frozen=True, slots=True)
class EngineState:
    """Everything an engine holds beyond its `StreamState`: what a handover moves.

    Its fields are the engine's parts themselves, not copies (copying the open
    sessions would cost what encoding them costs): export it when the engine is
    done, as a handover does when the stream is released, and restore it once.
    Its fields are the engine attributes `CARRIED` names (`_open` as three of them).
    """

    stream_time_ms: int | None
    """The largest event time seen (None before the first record)."""
    tracker: SafeOffsetTracker
    """Open sessions, held (parked) offsets and the ignore list, as of the last record."""
    timelines: tuple[KeyTimeline, ...]
    """Each key's open sessions and its schedule, in the engine's order."""
    deadlines: tuple[tuple[int, str], ...]
    """The deadline queue's entries that still count: (due time, key), sorted."""
    folds: tuple[tuple[int, str], ...]
    """The fold queue's entries that still count: (due time, key), sorted."""
    parked: Parked | None
    """A record waiting for the next record's verdict (`max_lead`), if any."""
    clocks: ProducerClocks
    """The live producers, their clocks and their history since the safe offset."""


CARRIED: Final = ("_stream_time_ms", "_tracker", "_open", "_parked", "_clocks")
"""The engine attributes an `EngineState` carries: `_open` (`OpenSessions`) as the fields
`timelines`, `deadlines` and `folds`, each other one as the field of its name."""
REBUILT: Final = (
    "stream",
    "processor",
    "timing",
    "_grace_ms",
    "_max_lead_ms",
    "_own_timestamp",
    "_own_is_end",
    "_epoch",
    "_budget",
    "_gate",
)
"""The engine attributes the next owner's constructor sets (from its processor and state).

`_gate` is a live resize's (`SessionEngine.attach`): never handed over, because a stream
whose resize is unsettled holds its safe offset at a record and so refuses a handover
(docs/resize.md); the next owner's task attaches its own."""
PER_OWNER: Final = (
    "_fragments",
    "_watermarks",
    "_sessions",
    "_late",
    "_skipped",
    "_hook_failures",
    "_future",
    "_truncated",
    "_invalid_watermarks",
)
"""The engine's counters: what this owner did, so they start at zero on the next."""
