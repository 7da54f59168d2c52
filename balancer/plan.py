"""The balance arithmetic (DESIGN section 4, thesis Appendix A with its slips fixed), pure.

One balance pass of one member shares out the `balanceable` streams (the
active ones minus the quarantined, whose state is corrupt), in two steps
because the overflow-slot race is decided by ZooKeeper in between:

1. `slot_plan`: keep the slot we hold while its index is below the overflow
   count; otherwise try the free slots `0..overflow-1` in order.
2. `moves`: with the target known (`target`), pick the streams to release
   (cheapest first) or the free streams to try to claim (random order).

Nothing here touches ZooKeeper, so the property tests drive it directly.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from framework.kernel.errors import InvalidArgument

__all__ = [
    "CostFunction",
    "Moves",
    "Share",
    "SlotPlan",
    "balanceable",
    "cheapest",
    "default_cost",
    "moves",
    "share",
    "slot_plan",
    "target",
]

CostFunction = Callable[[str], float]
"""How expensive a stream is to move; the cheapest are released first."""


@dataclass(frozen=True)
class Share:
    """Every member gets `base` streams; `overflow` of them get one more."""

    base: int
    overflow: int


@dataclass(frozen=True)
class SlotPlan:
    """What to do with overflow slots: keep one, drop one, or try candidates in order."""

    keep: int | None
    drop: int | None
    candidates: tuple[int, ...]


@dataclass(frozen=True)
class Moves:
    """Streams to release now, and free streams to try, in order, until `need` succeed."""

    release: tuple[str, ...]
    claim: tuple[str, ...]
    need: int


def balanceable(streams: Iterable[str], quarantined: Collection[str]) -> list[str]:
    """The streams a pass shares out: the active ones minus the quarantined, sorted.

    A quarantined stream counts neither in the share nor as a claim candidate,
    so the spread rule holds among the healthy streams; one that we hold is
    released like a stream that is no longer active (`moves`).
    """
    return sorted(set(streams).difference(quarantined))


def share(streams: int, members: int) -> Share:
    """Quotient is the base share, remainder the overflow count (Appendix A had them swapped)."""
    if streams < 0 or members < 1:
        raise InvalidArgument(f"need streams >= 0 and members >= 1, got {streams}, {members}")
    base, overflow = divmod(streams, members)
    return Share(base, overflow)


def slot_plan(
    held_slot: int | None, shares: Share, taken: Collection[int], *, held: int, free: int
) -> SlotPlan:
    """Decide about overflow slots, given our slot, the taken slots and our holdings.

    Sticky: a slot whose index is still below the overflow count is kept.  A
    member without one only competes when it would otherwise have to give up a
    stream (`held > base`) or when free streams are left beyond its base share;
    so a newcomer does not win a slot, and with it one extra move, from members
    that already hold base + 1.
    """
    if held_slot is not None and held_slot < shares.overflow:
        return SlotPlan(keep=held_slot, drop=None, candidates=())
    if held + free <= shares.base:
        return SlotPlan(keep=None, drop=held_slot, candidates=())
    candidates = tuple(i for i in range(shares.overflow) if i not in taken)
    return SlotPlan(keep=None, drop=held_slot, candidates=candidates)


def target(shares: Share, has_slot: bool) -> int:
    """How many streams a member should hold."""
    return shares.base + (1 if has_slot else 0)


def default_cost(stream: str) -> float:
    """Arbitrary but deterministic and spread out: a stable hash of the name."""
    digest = hashlib.blake2b(stream.encode(), digest_size=4).digest()
    return float(int.from_bytes(digest, "little"))


def cheapest(held: Iterable[str], count: int, cost: CostFunction = default_cost) -> list[str]:
    """The `count` streams cheapest to move, ties broken by name."""
    return sorted(held, key=lambda name: (cost(name), name))[: max(0, count)]


def moves(
    held: Iterable[str],
    streams: Collection[str],
    claimed: Collection[str],
    goal: int,
    *,
    cost: CostFunction = default_cost,
    rng: random.Random | None = None,
) -> Moves:
    """Streams to release (gone ones, then the cheapest extras) or free ones to try to claim."""
    mine = set(held)
    gone = sorted(mine.difference(streams))  # a stream that is no longer active
    kept = mine.intersection(streams)
    extra = cheapest(kept, len(kept) - goal, cost)
    need = max(0, goal - len(kept))
    free: list[str] = []
    if need:
        free = sorted(set(streams).difference(claimed, mine))
        (rng or random.Random()).shuffle(free)  # spread concurrent claimers over the streams
    return Moves(release=(*gone, *extra), claim=tuple(free), need=need)
