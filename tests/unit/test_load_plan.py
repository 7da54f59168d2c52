"""Property tests of the load-aware balance arithmetic (`balancer.load_plan`), without ZooKeeper.

A tiny in-memory world stands in for ZooKeeper: claims (stream -> member), the
published loads, and when each stream's last load move started.  Every member
computes the same plan, so one `plan` call per round stands for all of them;
a round carries it out the way the members do: the source releases the moved
stream (recording `moved_at`), then every free stream is claimed by the member
the next plan names.  The clock advances by a step hypothesis chooses.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from balancer import load_plan as lp

POLICY = lp.LoadPolicy(tolerance=0.2, margin=0.05, max_moves=3, interval=10.0)
MAX_ROUNDS = 400


@dataclass
class World:
    """Claims, published loads and move times, as ZooKeeper would hold them."""

    members: list[str]
    streams: list[str]
    loads: dict[str, float]
    owners: dict[str, str] = field(default_factory=dict)
    moved_at: dict[str, float] = field(default_factory=dict)
    now: float = 1000.0
    moves: list[tuple[float, lp.Move]] = field(default_factory=list)

    def view(self) -> lp.LoadView:
        return lp.LoadView(
            self.members, self.streams, self.owners, self.loads, self.moved_at, self.now
        )

    def loads_now(self) -> dict[str, float]:
        loads = lp.effective_loads(self.streams, self.loads)
        return lp.node_loads(self.owners, self.members, loads)


def claim_free(world: World, policy: lp.LoadPolicy) -> lp.LoadPlan:
    """Every member claims the free streams the plan gives it."""
    planned = lp.plan(world.view(), policy)
    for stream in world.streams:
        if stream not in world.owners:
            world.owners[stream] = planned.assignment[stream]
    return planned


def run_round(world: World, policy: lp.LoadPolicy) -> lp.LoadPlan:
    """One round: the plan's source releases its move, then the free streams are claimed."""
    planned = lp.plan(world.view(), policy)
    for move in planned.moves:
        assert world.owners.pop(move.stream) == move.source
        world.moved_at[move.stream] = world.now
        world.moves.append((world.now, move))
        # Whoever plans next (any member) places the released stream on the destination.
        assert lp.plan(world.view(), policy).assignment[move.stream] == move.destination
    claim_free(world, policy)
    return planned


def settle(world: World, policy: lp.LoadPolicy, step: float) -> int:
    """Run rounds, the clock moving by `step`, until a round moves nothing with the budget full."""
    for rounds in range(1, MAX_ROUNDS + 1):
        planned = run_round(world, policy)
        world.now += step
        if not planned.moves and planned.budget == policy.max_moves:
            return rounds
    raise AssertionError(f"no fixed point after {MAX_ROUNDS} rounds")


def no_single_move_helps(world: World, policy: lp.LoadPolicy) -> bool:
    """Ignoring the cap and cool-downs, no move gains more than the margin."""
    loads = lp.effective_loads(world.streams, world.loads)
    totals = lp.node_loads(world.owners, world.members, loads)
    owned = [s for s, o in world.owners.items() if o in world.members]
    return lp.best_move(world.owners, owned, loads, totals, policy.margin) is None


def squares(world: World) -> float:
    return math.fsum(load * load for load in world.loads_now().values())


def make_world(data: st.DataObject, *, unknown: bool = True) -> World:
    count = data.draw(st.integers(1, 40), label="streams")
    members = [f"m{i}" for i in range(data.draw(st.integers(1, 7), label="members"))]
    streams = [f"s{i:03d}" for i in range(count)]
    load = st.floats(0, 1000, allow_nan=False) | st.sampled_from([0.0, 1.0, 50.0])
    values = data.draw(
        st.lists(load | st.none() if unknown else load, min_size=count, max_size=count)
    )
    loads = {s: v for s, v in zip(streams, values, strict=True) if v is not None}
    world = World(members, streams, loads)
    start = data.draw(st.lists(st.integers(-1, len(members) - 1), min_size=count, max_size=count))
    world.owners = {s: members[i] for s, i in zip(streams, start, strict=True) if i >= 0}
    return world


steps = st.sampled_from([0.5, 2.5, 10.0, 25.0])


@settings(max_examples=150)
@given(st.data(), steps)
def test_converges_within_tolerance_or_where_no_single_move_helps(
    data: st.DataObject, step: float
) -> None:
    world = make_world(data)
    claim_free(world, POLICY)
    settle(world, POLICY, step)
    assert set(world.owners) == set(world.streams)
    assert lp.within_tolerance(world.loads_now(), POLICY.tolerance) or no_single_move_helps(
        world, POLICY
    )


@settings(max_examples=150)
@given(st.data(), steps)
def test_never_more_than_the_cap_per_interval_and_each_move_cools_down(
    data: st.DataObject, step: float
) -> None:
    world = make_world(data)
    claim_free(world, POLICY)
    settle(world, POLICY, step)
    times = [at for at, _ in world.moves]
    for start in times:
        window = [t for t in times if start <= t < start + POLICY.interval]
        assert len(window) <= POLICY.max_moves
    last: dict[str, float] = {}
    for at, move in world.moves:
        assert at - last.get(move.stream, -math.inf) >= POLICY.interval, move
        last[move.stream] = at


@settings(max_examples=150)
@given(st.data())
def test_every_move_lowers_the_imbalance_by_more_than_the_margin(data: st.DataObject) -> None:
    world = make_world(data)
    claim_free(world, POLICY)
    for _ in range(60):
        before, loads = squares(world), world.loads_now()
        mean = math.fsum(loads.values()) / len(loads)
        planned = run_round(world, POLICY)
        world.now += POLICY.interval  # nothing cools down: every round may move
        for move in planned.moves:
            least = POLICY.margin * mean
            drop = before - squares(world)
            assert drop > max(2 * move.load * least, least * least) * (1 - 1e-6)
        if not planned.moves:
            break


@given(st.data())
def test_no_move_when_every_member_is_within_tolerance(data: st.DataObject) -> None:
    world = make_world(data)
    claim_free(world, POLICY)
    planned = lp.plan(world.view(), POLICY)
    if lp.within_tolerance(world.loads_now(), POLICY.tolerance):
        assert planned.moves == ()


@given(st.data(), steps)
def test_no_flapping_once_settled_replanning_moves_nothing(
    data: st.DataObject, step: float
) -> None:
    world = make_world(data)
    claim_free(world, POLICY)
    settle(world, POLICY, step)
    world.now += 10 * POLICY.interval  # every cool-down over, the whole budget back
    for _ in range(3):
        assert lp.plan(world.view(), POLICY).moves == ()
        world.now += POLICY.interval


@given(st.data(), st.randoms(use_true_random=False))
def test_the_plan_is_deterministic_whatever_the_input_order(
    data: st.DataObject, rng: random.Random
) -> None:
    world = make_world(data)
    world.moved_at = {s: world.now - rng.uniform(0, 2 * POLICY.interval) for s in world.streams[:3]}
    first = lp.plan(world.view(), POLICY)
    members, streams = list(world.members), list(world.streams)
    rng.shuffle(members)
    rng.shuffle(streams)
    owners = dict(rng.sample(sorted(world.owners.items()), len(world.owners)))
    loads = dict(rng.sample(sorted(world.loads.items()), len(world.loads)))
    view = lp.LoadView(members, streams, owners, loads, world.moved_at, world.now)
    assert lp.plan(view, POLICY) == first


@given(st.data(), st.lists(st.integers(0, 39), max_size=5))
def test_every_stream_is_assigned_exactly_once_and_claims_are_kept(
    data: st.DataObject, foreign: list[int]
) -> None:
    world = make_world(data)
    departed = {world.streams[i % len(world.streams)] for i in foreign}
    for stream in departed:
        world.owners[stream] = "gone"  # a draining node, or one whose session has not expired
    planned = lp.plan(world.view(), POLICY)
    assert set(planned.assignment) == set(world.streams) - departed
    assert set(planned.assignment.values()) <= set(world.members)
    assert len(planned.moves) <= 1
    moved = {m.stream for m in planned.moves}
    for stream, owner in world.owners.items():
        if owner in world.members and stream not in moved:
            assert planned.assignment[stream] == owner  # sticky: only the planned move changes


def test_unknown_loads_count_as_the_mean_of_the_known() -> None:
    loads = lp.effective_loads(["a", "b", "c", "d"], {"a": 10.0, "b": 30.0, "x": 99.0})
    assert loads == {"a": 10.0, "b": 30.0, "c": 20.0, "d": 20.0}
    assert lp.effective_loads(["a", "b"], {}) == {"a": 1.0, "b": 1.0}  # nothing known: by count
    assert lp.effective_loads(["a"], {"a": math.nan}) == {"a": 1.0}  # unusable counts as unknown


def test_free_streams_go_heaviest_first_to_the_least_loaded() -> None:
    view = lp.LoadView(["m1", "m2"], ["h", "a", "b"], {}, {"h": 10.0, "a": 4.0, "b": 4.0})
    planned = lp.plan(view, POLICY)
    assert planned.assignment == {"h": "m1", "a": "m2", "b": "m2"}
    assert planned.moves == () and planned.balanced


@pytest.mark.parametrize("members", [2, 3])
def test_skewed_traffic_four_hot_streams_of_sixteen(members: int) -> None:
    # 4 streams carry 70% of the fragments, 12 the other 30%: the integration test's traffic.
    streams = [f"s{i:02d}" for i in range(16)]
    loads = {s: (17.5 if i < 4 else 2.5) for i, s in enumerate(streams)}
    world = World([f"m{i}" for i in range(members)], streams, loads)
    world.owners = {s: "m0" for s in streams}  # everything on one node, as after a start alone
    settle(world, POLICY, step=2.5)
    assert lp.within_tolerance(world.loads_now(), POLICY.tolerance), world.loads_now()
    assert len(world.moves) <= 6


@example(lp.LoadPolicy())
@given(st.builds(lp.LoadPolicy, tolerance=st.floats(0.01, 0.9), margin=st.floats(0, 0.5)))
def test_policy_accepts_its_ranges(policy: lp.LoadPolicy) -> None:
    assert 0 < policy.tolerance < 1


@pytest.mark.parametrize(
    "settings_",
    [{"tolerance": 0}, {"tolerance": 1.5}, {"margin": -0.1}, {"max_moves": 0}, {"interval": 0}],
)
def test_policy_refuses_nonsense(settings_: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        lp.LoadPolicy(**settings_)  # type: ignore[arg-type]


# Totality: whatever loads, move times and clock a view holds, `plan` returns a plan.

_ANY_FLOAT = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [9e307, 1.7976931348623157e308, -9e307, 1e12, 1e12 + 1, 5e-324]
)


def test_two_absurd_published_loads_do_not_crash_the_plan() -> None:
    view = lp.LoadView(
        members=["n1", "n2"],
        streams=["a", "b", "c"],
        owners={"a": "n1", "b": "n1"},
        loads={"a": 9e307, "b": 9e307, "c": 4.0},
    )
    plan = lp.plan(view, lp.LoadPolicy())
    assert set(plan.assignment) == {"a", "b", "c"}
    # Out of range: unknown, so they count as the mean of the known loads.
    assert plan.stream_loads == {"a": 4.0, "b": 4.0, "c": 4.0}


@settings(max_examples=300)
@given(
    st.dictionaries(st.sampled_from("abcdefgh"), _ANY_FLOAT),
    st.dictionaries(st.sampled_from("abcdefgh"), _ANY_FLOAT),
    _ANY_FLOAT,
    st.dictionaries(st.sampled_from("abcdefgh"), st.sampled_from(["n1", "n2", "gone"])),
)
def test_the_plan_is_total_for_any_floats(
    loads: dict[str, float], moved_at: dict[str, float], now: float, owners: dict[str, str]
) -> None:
    streams = list("abcdefgh")
    view = lp.LoadView(["n1", "n2", "n3"], streams, owners, loads, moved_at, now)
    plan = lp.plan(view, POLICY)
    placed = {s for s in streams if owners.get(s) != "gone"}
    assert set(plan.assignment) == placed
    assert all(
        math.isfinite(v) and 0 <= v <= lp.MAX_STREAM_LOAD for v in plan.stream_loads.values()
    )
    assert all(math.isfinite(v) for v in plan.node_loads.values())
