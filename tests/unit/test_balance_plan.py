"""Property tests of the pure balance arithmetic (`balancer.plan`), without ZooKeeper.

A tiny in-memory world stands in for ZooKeeper: one owner per stream (the
claim znode), one member per overflow slot.  Members run balance passes one at
a time in an order hypothesis chooses, each pass using exactly the functions
the real balancer uses, until a whole round changes nothing (the fixed point).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from balancer import plan

MAX_ROUNDS = 50


@dataclass
class World:
    """What ZooKeeper would hold: claims (stream -> member) and slots (index -> member)."""

    streams: list[str]
    members: list[str]
    owner: dict[str, str] = field(default_factory=dict)
    slots: dict[int, str] = field(default_factory=dict)
    quarantined: set[str] = field(default_factory=set)

    @property
    def healthy(self) -> list[str]:
        return plan.balanceable(self.streams, self.quarantined)

    def held(self, member: str) -> set[str]:
        return {s for s, o in self.owner.items() if o == member}

    def slot_of(self, member: str) -> int | None:
        return next((i for i, o in self.slots.items() if o == member), None)

    def leave(self, member: str) -> None:
        """Ephemeral znodes of a departed member vanish."""
        self.members.remove(member)
        self.owner = {s: o for s, o in self.owner.items() if o != member}
        self.slots = {i: o for i, o in self.slots.items() if o != member}

    def quarantine(self, stream: str) -> None:
        """Its owner creates the marker, then frees the claim without a revoke."""
        self.quarantined.add(stream)
        self.owner.pop(stream, None)


def balance_pass(world: World, member: str, rng: random.Random) -> None:
    """One member's pass, as `Balancer` runs it against ZooKeeper."""
    held = world.held(member)
    streams = world.healthy
    shares = plan.share(len(streams), len(world.members))
    free = len(set(streams) - set(world.owner))
    slots = plan.slot_plan(
        world.slot_of(member), shares, set(world.slots), held=len(held), free=free
    )
    if slots.drop is not None:
        del world.slots[slots.drop]
    slot = slots.keep
    for index in slots.candidates:
        if index not in world.slots:  # the create of overflow_streams/<index> succeeds
            world.slots[index] = member
            slot = index
            break
    moves = plan.moves(
        held, streams, set(world.owner), plan.target(shares, slot is not None), rng=rng
    )
    for stream in moves.release:
        del world.owner[stream]
    got = 0
    for stream in moves.claim:
        if got == moves.need:
            break
        if stream not in world.owner:  # the create of claimed_streams/<stream> succeeds
            world.owner[stream] = member
            got += 1


def settle(world: World, rng: random.Random) -> int:
    """Run rounds in random member order until nothing changes; return the rounds used."""
    for rounds in range(1, MAX_ROUNDS + 1):
        before = (dict(world.owner), dict(world.slots))
        for member in rng.sample(world.members, len(world.members)):
            balance_pass(world, member, rng)
        if (world.owner, world.slots) == before:
            return rounds
    raise AssertionError(f"no fixed point after {MAX_ROUNDS} rounds")


def make_world(streams: int, members: int) -> World:
    return World([f"s{i:04d}" for i in range(streams)], [f"m{i}" for i in range(members)])


def assert_balanced(world: World) -> None:
    """Every healthy stream owned exactly once, no quarantined one; base or base + 1 each."""
    shares = plan.share(len(world.healthy), len(world.members))
    assert set(world.owner) == set(world.healthy)
    counts = [len(world.held(m)) for m in world.members]
    assert all(c in (shares.base, shares.base + 1) for c in counts), counts
    assert sum(c == shares.base + 1 for c in counts) <= shares.overflow
    assert max(counts) - min(counts) <= 1


def moved(before: dict[str, str], after: dict[str, str]) -> set[str]:
    return {s for s in after if before.get(s) != after[s]}


sizes = st.tuples(st.integers(0, 150), st.integers(1, 16))
seeds = st.integers(0, 2**32 - 1)


@given(sizes, seeds)
def test_fixed_point_from_scratch_is_balanced(size: tuple[int, int], seed: int) -> None:
    world = make_world(*size)
    settle(world, random.Random(seed))
    assert_balanced(world)


@given(sizes, seeds)
@example((10, 3), 0)  # overflow grows from 1 to 2: the newcomer must not win the new slot
@example((64, 5), 1)
def test_join_moves_only_the_newcomers_share(size: tuple[int, int], seed: int) -> None:
    rng = random.Random(seed)
    world = make_world(*size)
    settle(world, rng)
    before = dict(world.owner)
    world.members.append("newcomer")
    settle(world, rng)
    assert_balanced(world)
    shifted = moved(before, world.owner)
    # Every moved stream went to the newcomer, and it took no more than its base share.
    assert shifted == world.held("newcomer")
    assert len(shifted) == plan.share(len(world.streams), len(world.members)).base


@given(sizes.filter(lambda s: s[1] > 1), seeds, st.integers(0, 15))
@example((10, 4), 0, 0)  # the leaver held an overflow slot
def test_leave_moves_only_the_leavers_streams(size: tuple[int, int], seed: int, which: int) -> None:
    rng = random.Random(seed)
    world = make_world(*size)
    settle(world, rng)
    leaver = world.members[which % len(world.members)]
    orphaned = world.held(leaver)
    before = dict(world.owner)
    world.leave(leaver)
    settle(world, rng)
    assert_balanced(world)
    assert moved(before, world.owner) == orphaned


@settings(max_examples=50)
@given(st.integers(1, 100), st.integers(2, 10), seeds)
def test_many_changes_in_a_row_stay_balanced(streams: int, members: int, seed: int) -> None:
    rng = random.Random(seed)
    world = make_world(streams, members)
    for step in range(6):
        if rng.random() < 0.5 and len(world.members) > 1:
            world.leave(rng.choice(world.members))
        else:
            world.members.append(f"j{step}")
        settle(world, rng)
        assert_balanced(world)


def test_share_is_quotient_and_remainder() -> None:
    assert plan.share(13, 5) == plan.Share(base=2, overflow=3)  # 3/3/3/2/2, not 3/3/3/3/1
    assert plan.share(3, 5) == plan.Share(base=0, overflow=3)
    with pytest.raises(ValueError):
        plan.share(4, 0)


def test_slot_kept_while_below_overflow_and_dropped_after() -> None:
    shares = plan.share(10, 4)  # base 2, overflow 2
    assert plan.slot_plan(1, shares, {0, 1}, held=3, free=0).keep == 1
    dropped = plan.slot_plan(2, shares, {0, 1, 2}, held=3, free=0)
    assert (dropped.keep, dropped.drop, dropped.candidates) == (None, 2, ())


def test_newcomer_does_not_compete_for_a_slot_when_nothing_is_free() -> None:
    shares = plan.share(10, 4)
    assert plan.slot_plan(None, shares, {0}, held=0, free=0).candidates == ()
    assert plan.slot_plan(None, shares, {0}, held=3, free=0).candidates == (1,)


def test_release_is_cheapest_first_and_deterministic() -> None:
    costs = {"a": 3.0, "b": 1.0, "c": 2.0}
    result = plan.moves(["a", "b", "c"], ["a", "b", "c"], ["a", "b", "c"], 1, cost=costs.get)
    assert result.release == ("b", "c")
    assert result.need == 0


def test_streams_no_longer_active_are_released_first() -> None:
    result = plan.moves(["gone", "a"], ["a", "b"], ["gone", "a"], 2)
    assert result.release == ("gone",)
    assert (result.claim, result.need) == (("b",), 1)


def test_balanceable_leaves_quarantined_streams_out() -> None:
    assert plan.balanceable(["s2", "s0", "s1"], {"s1", "elsewhere"}) == ["s0", "s2"]
    assert plan.balanceable(["s0"], set()) == ["s0"]
    assert plan.balanceable([], {"s0"}) == []


def test_a_held_quarantined_stream_is_released_and_never_claimed() -> None:
    streams = plan.balanceable(["a", "b", "q"], {"q"})
    result = plan.moves(["a", "q"], streams, ["a", "q"], 2, rng=random.Random(0))
    assert result.release == ("q",)
    assert (result.claim, result.need) == (("b",), 1)
    free = plan.moves([], streams, [], 3, rng=random.Random(0))
    assert "q" not in free.claim and free.need == 3


def test_share_counts_only_the_healthy_streams() -> None:
    # 13 streams, 2 quarantined, 5 members: 11 healthy give 3/2/2/2/2, never 3/3/3/2/2.
    streams = plan.balanceable([f"s{i:02d}" for i in range(13)], {"s03", "s07"})
    assert plan.share(len(streams), 5) == plan.Share(base=2, overflow=1)


quarantine_picks = st.lists(st.integers(0, 149), max_size=10)


@given(sizes, quarantine_picks, seeds)
@example((10, 3), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], 0)  # everything quarantined
def test_fixed_point_with_quarantined_streams_is_balanced_among_the_healthy(
    size: tuple[int, int], picks: list[int], seed: int
) -> None:
    world = make_world(*size)
    world.quarantined = {world.streams[i % len(world.streams)] for i in picks if world.streams}
    settle(world, random.Random(seed))
    assert_balanced(world)
    assert not world.quarantined & set(world.owner)


@given(sizes.filter(lambda s: s[0] > 0), st.integers(0, 149), seeds)
@example((10, 4), 0, 0)
@example((8, 4), 3, 1)  # the quarantined stream's owner held an overflow slot, or none
def test_quarantining_a_held_stream_moves_at_most_one_other(
    size: tuple[int, int], which: int, seed: int
) -> None:
    rng = random.Random(seed)
    world = make_world(*size)
    settle(world, rng)
    before = dict(world.owner)
    bad = world.streams[which % len(world.streams)]
    world.quarantine(bad)
    settle(world, rng)
    assert_balanced(world)
    assert bad not in world.owner
    assert len(moved(before, world.owner)) <= 1


@given(sizes, st.integers(0, 149), seeds)
def test_a_reset_stream_is_taken_again_and_the_rest_stays_put(
    size: tuple[int, int], which: int, seed: int
) -> None:
    rng = random.Random(seed)
    world = make_world(*size)
    if world.streams:
        world.quarantined = {world.streams[which % len(world.streams)]}
    settle(world, rng)
    before = dict(world.owner)
    world.quarantined.clear()  # `streams reset` deleted the marker
    settle(world, rng)
    assert_balanced(world)
    assert len(moved(before, world.owner)) <= 2  # the reset stream, maybe one to even out
