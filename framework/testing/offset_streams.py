"""`steps`: the hypothesis strategy the engine's property tests draw their random streams from."""

from __future__ import annotations

from hypothesis import strategies as st

__all__ = ["Step", "steps"]

Step = tuple[int, int, int, int, int]
"""(clock advance, offset step, key, lag behind the clock, kind); the test says what kinds mean."""


def steps(kinds: int, most: int) -> st.SearchStrategy[list[Step]]:
    """Up to `most` steps whose kind is in 0..`kinds`.

    Small numbers on purpose: they make the boundaries (a gap of exactly `timeout`, an
    END and a fragment in the same millisecond, a lag of exactly `grace`) common. Offset
    steps of 2 and 3 are the gaps Kafka offsets may have, and the few keys are reused.
    """
    step = st.tuples(
        st.integers(0, 3),
        st.integers(1, 3),
        st.integers(0, 2),
        st.integers(0, 10),
        st.integers(0, kinds),
    )
    # Hypothesis favours short lists; a drawn length gives long interleavings too.
    return st.integers(0, most).flatmap(lambda n: st.lists(step, min_size=n, max_size=n))
