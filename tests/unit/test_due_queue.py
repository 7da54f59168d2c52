"""`DueQueue` pops what a heap of (time, key) with lazy deletion pops, in the same order."""

from __future__ import annotations

import heapq
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sessionizer.due_queue import SLOT_SHIFT, DueQueue

KEYS = st.sampled_from(["a", "b", "c", "d", "e"])
# Times spread over a few slots, and steps of the line within and across them; on a
# coarse grid as well, so that the line often lands exactly on a due time or a slot's edge.
TIMES = st.integers(0, 6 << SLOT_SHIFT) | st.integers(0, 24).map(lambda n: n << 8)
LINE_STEPS = st.integers(0, 3 << SLOT_SHIFT) | st.integers(0, 12).map(lambda n: n << 8)
STEPS = st.lists(st.tuples(st.lists(st.tuples(KEYS, TIMES), max_size=6), LINE_STEPS), max_size=12)


def _live_pops(steps: list[tuple[list[tuple[str, int]], int]], use_queue: bool) -> list[Any]:
    """Schedule, advance the line, handle what is due as the engine does: a popped entry
    counts while its time is the key's due time; handling it clears that."""
    due: dict[str, int | None] = {}
    queue = DueQueue(due.get)
    heap: list[tuple[int, str]] = []
    handled: list[tuple[int, str, int]] = []
    line = 0
    for schedule, step in [*steps, ([], 100 << SLOT_SHIFT)]:
        for key, time in schedule:
            current = due.get(key)
            if current is None or time < current:  # the engine's rule (`_schedule`)
                due[key] = time
                queue.add(time, key) if use_queue else heapq.heappush(heap, (time, key))
        line += step
        while True:
            if use_queue:
                entry = queue.pop_due(line) if queue.earliest <= line else None
            else:
                entry = heapq.heappop(heap) if heap and heap[0][0] <= line else None
            if entry is None:
                break
            time, key = entry
            if due.get(key) == time:
                due[key] = None
                handled.append((time, key, line))
    assert all(value is None for value in due.values())  # everything came due at the end
    return handled


@settings(max_examples=300, deadline=None)
@given(STEPS)
def test_the_queue_handles_every_key_when_and_in_the_order_a_heap_does(
    steps: list[tuple[list[tuple[str, int]], int]],
) -> None:
    assert _live_pops(steps, use_queue=True) == _live_pops(steps, use_queue=False)


def test_an_entry_costs_no_tuple_until_its_slot_is_reached() -> None:
    queue = DueQueue(lambda key: 5 << SLOT_SHIFT)
    queue.add(5 << SLOT_SHIFT, "k")
    assert queue.live() == [(5 << SLOT_SHIFT, "k")]
    assert queue.earliest == 5 << SLOT_SHIFT
    assert queue.pop_due((5 << SLOT_SHIFT) - 1) is None
    assert queue.pop_due(5 << SLOT_SHIFT) == (5 << SLOT_SHIFT, "k")
    assert queue.live() == []
