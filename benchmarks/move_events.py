"""What the nodes' logs say about streams that moved: resume times, records replayed, handovers.

Pure functions over parsed structlog events (`MemberProcess.events()`), shared by
the failover and skew scenarios and unit-tested on their own.  A `stream_resumed`
event carries `offset` (where reading starts), `committed_offset`, `handover`
(bool) and `replay` (records re-read before new ones); older nodes logged no
`replay`, so it falls back to `committed_offset - offset`.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Collection, Hashable, Iterable, Sequence
from datetime import datetime
from typing import Any

__all__ = [
    "event_time",
    "imbalance",
    "mean_loads",
    "medians",
    "move_figures",
    "released_streams",
    "replay_of",
    "resumed_since",
]

Event = dict[str, Any]


def event_time(event: Event) -> float:
    """The event's wall time (its ISO `timestamp`), in seconds since the epoch."""
    return datetime.fromisoformat(event["timestamp"]).timestamp()


def replay_of(event: Event) -> int:
    """Records a `stream_resumed` stream re-read before new ones."""
    if event.get("replay") is not None:
        return int(event["replay"])
    return int(event["committed_offset"]) - int(event["offset"])


def resumed_since(
    events: Iterable[Event], since: float, streams: Collection[str] | None = None
) -> list[Event]:
    """The `stream_resumed` events at or after `since` (of `streams` only, when given)."""
    return [
        e
        for e in events
        if e.get("event") == "stream_resumed"
        and event_time(e) >= since
        and (streams is None or e["stream"] in streams)
    ]


def move_figures(
    taken: Sequence[Event], reference: float, expected: Collection[str] | None = None
) -> dict[str, Any]:
    """Figures of one move, times from `reference` (the signal, or the joiner's start).

    `resumed_s` is the time of the last `stream_resumed` of `taken`; None when a
    stream of `expected` (those that had to move) never resumed: the move is
    incomplete and has no end time.
    """
    times = [event_time(e) for e in taken]
    moved = {e["stream"] for e in taken}
    complete = bool(times) and (expected is None or moved >= set(expected))
    return {
        "streams_moved": len(moved),
        "first_resumed_s": min(times) - reference if times else None,
        "resumed_s": max(times) - reference if complete else None,
        "replayed": sum(replay_of(e) for e in taken),
        "handovers_used": sum(bool(e.get("handover")) for e in taken),
    }


def released_streams(events: Iterable[Event], start: float, end: float) -> int:
    """Streams released (`streams_released` events) in [start, end)."""
    return sum(
        len(e["streams"])
        for e in events
        if e.get("event") == "streams_released" and start <= event_time(e) < end
    )


def medians(
    runs: Sequence[dict[str, Any]],
    group: Callable[[dict[str, Any]], Hashable],
    keys: Sequence[str],
    carry: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """One row per group (first-seen order): `carry` keys from its first run, `runs`,
    the median of each of `keys` (None values left out), and `exact` if every run was."""
    groups: dict[Hashable, list[dict[str, Any]]] = {}
    for run in runs:
        groups.setdefault(group(run), []).append(run)
    rows = []
    for mine in groups.values():
        row: dict[str, Any] = {key: mine[0].get(key) for key in carry}
        row["runs"] = len(mine)
        for key in keys:
            values = [r[key] for r in mine if r.get(key) is not None]
            row[key] = statistics.median(values) if values else None
        row["exact"] = all(r.get("exact") for r in mine)
        rows.append(row)
    return rows


def mean_loads(readings: Sequence[dict[str, float]]) -> dict[str, float]:
    """Each member's load averaged over the readings (members of the first reading)."""
    if not readings:
        return {}
    return {
        member: statistics.fmean(r.get(member, 0.0) for r in readings) for member in readings[0]
    }


def imbalance(loads: dict[str, float]) -> float | None:
    """The busiest member's load over the mean member load (1.0: perfectly even)."""
    if not loads:
        return None
    mean = statistics.fmean(loads.values())
    return max(loads.values()) / mean if mean else None
