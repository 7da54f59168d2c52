"""A live resize run in-process, step by step (docs/resize.md): fixed scenarios, seeded."""

from __future__ import annotations

import pytest

from framework.testing.resize_cases import Plan, check, run


@pytest.mark.parametrize(
    ("old", "new", "producers"),
    [(2, 3, 2), (2, 5, 3), (1, 4, 2), (4, 2, 2), (3, 1, 1), (5, 3, 3)],
)
def test_a_resize_gives_the_batch_sessions_with_the_ids_of_their_first_stream(
    old: int, new: int, producers: int
) -> None:
    for seed in range(4):
        check(run(Plan(old, new, producers=producers), seed))


@pytest.mark.parametrize(("old", "new"), [(2, 5), (4, 2)])
def test_crashes_and_handovers_on_every_stream_change_nothing(old: int, new: int) -> None:
    for seed in range(4):
        world = run(Plan(old, new, producers=3, crash=0.03, handover=0.03), seed)
        check(world)
        assert world.crashes and world.handovers


@pytest.mark.parametrize(("old", "new"), [(2, 5), (4, 2)])
def test_a_producer_that_never_switches_holds_the_barrier_until_it_ends_and_loses_nothing(
    old: int, new: int
) -> None:
    """The old streams keep its moving keys' sessions open and raw meanwhile, and the new
    ones hold back what the other producers sent them: still exactly the batch sessions."""
    for seed in range(4):
        world = run(Plan(old, new, producers=2, lagging=True, crash=0.02), seed)
        check(world)
        assert not world.producers[0].switched
