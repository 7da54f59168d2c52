"""The load-aware balance arithmetic (`--balance load`), pure: no ZooKeeper, no clock.

Every member computes the same `LoadPlan` from the same ZooKeeper data (the
members, the claims, each stream's published load and the time its last load
move started) and acts only on its own part of it: it releases the streams the
plan moves away from it and claims the free streams the plan gives it.  See
docs/balancing.md ("Balancing by load") for the algorithm and its invariants.

1. Effective loads: a stream's published fragments/s; a stream with none yet
   counts as the mean of the known ones (1.0 each when nothing is known, so an
   unmeasured cluster balances by count).
2. Free (unclaimed) streams go, heaviest first, to the member with the least
   load (ties: fewer streams, then the id).  A stream claimed by a consumer
   that is not a member (draining, or its session not yet expired) is left
   alone until its claim goes.
3. At most one load move per plan, and none when every member is within
   `tolerance` of the mean node load, when `max_moves` moves started within
   the last `interval`, or when no move gains more than `margin` of the mean.
   The move is the one that reduces the sum of squared node loads most:
   stream `s` from its owner `o` to the least loaded other member `d`, worth
   it only if `gap = load(o) - load(d) - s > margin * mean` and the drop
   `2 * s * gap > (margin * mean) ** 2`.  Under the first condition
   step 2 would put `s`, once released, exactly on `d`, so a release planned by
   one member is claimed by the member every plan names.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from framework.kernel.errors import InvalidSetting

__all__ = [
    "MAX_STREAM_LOAD",
    "LoadPlan",
    "LoadPolicy",
    "LoadView",
    "Move",
    "best_move",
    "effective_loads",
    "node_loads",
    "plan",
    "within_tolerance",
]

# Relative slack for float comparisons, so a plan never hinges on rounding.
_EPSILON = 1e-9

MAX_STREAM_LOAD = 1e12
"""The largest stream load (fragments/s) the plan believes; above it (or not a finite number
>= 0) a load counts as unknown.  About a million times what one node can read, and small
enough that no sum, square or product of the plan can overflow a double."""


@dataclass(frozen=True)
class LoadPolicy:
    """The knobs of `--balance load`; `interval` in seconds."""

    tolerance: float = 0.2
    """Every member's load within this fraction of the mean node load counts as balanced."""
    margin: float = 0.05
    """Hysteresis: a move must shrink the gap between its two members by more than this
    fraction of the mean node load (beyond the stream's own load)."""
    max_moves: int = 4
    """At most this many load moves start within any `interval`."""
    interval: float = 30.0
    """The move cap's window and each moved stream's cool-down."""

    def __post_init__(self) -> None:
        if not 0 < self.tolerance < 1:
            raise InvalidSetting(f"load tolerance must be in (0, 1), got {self.tolerance}")
        if not 0 <= self.margin < 1:
            raise InvalidSetting(f"load margin must be in [0, 1), got {self.margin}")
        if self.max_moves < 1:
            raise InvalidSetting(f"load max_moves must be >= 1, got {self.max_moves}")
        if self.interval <= 0:
            raise InvalidSetting(f"load interval must be > 0, got {self.interval}")


@dataclass(frozen=True)
class LoadView:
    """What ZooKeeper says, read once by a pass (`now` and `moved_at` in wall-clock seconds)."""

    members: Sequence[str]
    streams: Sequence[str]
    """The balanceable streams (active minus quarantined)."""
    owners: Mapping[str, str]
    """Claims: stream -> consumer id (consumers that are not members keep theirs)."""
    loads: Mapping[str, float] = field(default_factory=dict)
    """Published fragments/s per stream; a missing stream's load is unknown."""
    moved_at: Mapping[str, float] = field(default_factory=dict)
    """When the last load move of each stream started."""
    now: float = 0.0


@dataclass(frozen=True)
class Move:
    """Release `stream` from `source`; the next plans place it on `destination`."""

    stream: str
    source: str
    destination: str
    load: float
    gain: float
    """How much the sum of squared node loads drops: `2 * load * (gap - load)`."""


@dataclass(frozen=True)
class LoadPlan:
    """Where every placeable stream should be, the move to start now (if any), and why."""

    assignment: Mapping[str, str]
    """Stream -> member for every balanceable stream not claimed by a non-member."""
    moves: tuple[Move, ...]
    node_loads: Mapping[str, float]
    """Each member's load once the plan is carried out."""
    stream_loads: Mapping[str, float]
    """The effective load of every balanceable stream."""
    budget: int
    """Moves still allowed in the current window (before this plan's)."""
    balanced: bool
    """Every member ends within tolerance of the mean (`within_tolerance`)."""


def effective_loads(streams: Iterable[str], loads: Mapping[str, float]) -> dict[str, float]:
    """Each stream's known load, or the mean of the known ones (1.0 each if none is known).

    A load that is not a finite number in [0, `MAX_STREAM_LOAD`] is unknown, so the plan is
    total: no input makes its arithmetic overflow (`fsum` of two 9e307 would).
    """
    names = sorted(set(streams))
    known = [loads[s] for s in names if _valid(loads.get(s))]
    fill = math.fsum(known) / len(known) if known else 1.0
    return {s: loads[s] if _valid(loads.get(s)) else fill for s in names}


def _valid(value: float | None) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 <= value <= MAX_STREAM_LOAD
    )


def node_loads(
    assignment: Mapping[str, str], members: Iterable[str], loads: Mapping[str, float]
) -> dict[str, float]:
    """Each member's load: the sum of its streams' loads (summed in name order: deterministic)."""
    per_member: dict[str, list[float]] = {m: [] for m in sorted(set(members))}
    for stream in sorted(assignment):
        per_member[assignment[stream]].append(loads[stream])
    return {m: math.fsum(values) for m, values in per_member.items()}


def within_tolerance(loads: Mapping[str, float], tolerance: float) -> bool:
    """True when every member's load is within `tolerance` of the mean (idle counts as balanced)."""
    if not loads:
        return True
    mean = math.fsum(loads.values()) / len(loads)
    return all(abs(load - mean) <= tolerance * mean * (1 + _EPSILON) for load in loads.values())


def plan(view: LoadView, policy: LoadPolicy) -> LoadPlan:
    """The plan every member computes from `view` (deterministic, whatever the input order)."""
    members = sorted(set(view.members))
    streams = sorted(set(view.streams))
    loads = effective_loads(streams, view.loads)
    if not members:
        return LoadPlan({}, (), {}, loads, 0, balanced=True)
    assignment = {s: view.owners[s] for s in streams if view.owners.get(s) in members}
    # Claimed by a consumer that is no longer a member (a drain, a session not yet expired):
    # not ours to place until its claim goes.
    free = [s for s in streams if s not in view.owners]
    _place(free, assignment, members, loads)
    recent = _recent(view.moved_at, view.now, policy.interval)
    budget = max(0, policy.max_moves - len(recent))
    totals = node_loads(assignment, members, loads)
    moves: tuple[Move, ...] = ()
    if budget and not within_tolerance(totals, policy.tolerance):
        movable = [s for s in assignment if s in view.owners and s not in recent]
        move = best_move(assignment, movable, loads, totals, policy.margin)
        if move is not None:
            moves = (move,)
            assignment[move.stream] = move.destination
            totals = node_loads(assignment, members, loads)
    balanced = within_tolerance(totals, policy.tolerance)
    return LoadPlan(assignment, moves, totals, loads, budget, balanced=balanced)


def _recent(moved_at: Mapping[str, float], now: float, interval: float) -> set[str]:
    if not math.isfinite(now):
        return set()  # no clock to measure a cool-down against: nothing counts as recent
    return {s for s, at in moved_at.items() if math.isfinite(at) and now - at < interval}


def _place(
    free: Sequence[str],
    assignment: dict[str, str],
    members: Sequence[str],
    loads: Mapping[str, float],
) -> None:
    """Heaviest free stream first, each to the least loaded member (then fewest streams, id)."""
    totals = node_loads(assignment, members, loads)
    counts = dict.fromkeys(members, 0)
    for owner in assignment.values():
        counts[owner] += 1
    for stream in sorted(free, key=lambda s: (-loads[s], s)):
        member = min(members, key=lambda m: (totals[m], counts[m], m))
        assignment[stream] = member
        totals[member] += loads[stream]
        counts[member] += 1


def best_move(
    assignment: Mapping[str, str],
    movable: Iterable[str],
    loads: Mapping[str, float],
    totals: Mapping[str, float],
    margin: float,
) -> Move | None:
    """The single move of a `movable` stream that helps most, or None if none helps enough.

    `assignment` maps streams to members and `totals` holds every member's load.

    Helps enough, with `m = margin * mean node load` and `d` the least loaded
    member other than the owner `o` (least load, then fewest streams, then id):
    the gap `totals[o] - totals[d] - load` is more than `m` (hysteresis: noise
    smaller than `m` cannot reverse the move), and the sum of squared node
    loads drops by `2 * load * gap`, more than `m ** 2` (a stream too light to
    matter is not worth a move).
    """
    if len(totals) < 2:
        return None
    least = margin * math.fsum(totals.values()) / len(totals)
    counts = dict.fromkeys(totals, 0)
    for owner in assignment.values():
        counts[owner] += 1
    order = sorted(totals, key=lambda m: (totals[m], counts[m], m))
    best: Move | None = None
    for stream in sorted(movable):
        source, load = assignment[stream], loads[stream]
        destination = order[0] if order[0] != source else order[1]
        gap = totals[source] - totals[destination] - load
        gain = 2 * load * gap
        if gap <= least * (1 + _EPSILON) or gain <= least * least * (1 + _EPSILON):
            continue
        if best is None or gain > best.gain:
            best = Move(stream, source, destination, load, gain)
    return best
