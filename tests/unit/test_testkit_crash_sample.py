"""`crash_at` as docs/testing.md suggests it, `range(0, len(inputs), 25)`, with several streams."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import pytest

from framework.testkit import assert_exact, frag, run, run_with_crashes
from router.hashing import stream_for_key
from sessionizer.processor import StreamProcessor

MINUTE = 60_000
T = 1_704_103_200_000  # 2024-01-01T10:00:00Z


class Visits(StreamProcessor[dict[str, int]]):
    """Counts a visitor's fragments; 10 minutes of silence end a visit."""

    timeout = 600

    def open(self, key: str, fragment: Mapping[str, Any]) -> dict[str, int]:
        return {"n": 0}

    def update(self, session: dict[str, int], fragment: Mapping[str, Any]) -> None:
        session["n"] += 1

    def close(self, key: str, session: dict[str, int]) -> dict[str, int]:
        return session


def traffic(count: int) -> list[Any]:
    """`count` fragments of 7 interleaved visitors, a minute apart."""
    return [frag(f"visitor-{n % 7}", T + n * MINUTE, n=n) for n in range(count)]


@pytest.mark.parametrize("streams", [1, 2, 4])
def test_the_documented_sample_runs_with_any_number_of_streams(streams: int) -> None:
    inputs = traffic(100)
    baseline = assert_exact(Visits(), inputs, crash_at=range(0, len(inputs), 25), streams=streams)
    assert baseline.sessions == run(Visits(), inputs, streams=streams).sessions
    crashed = run_with_crashes(
        Visits(), inputs, crash_at=range(0, len(inputs), 25), streams=streams
    )
    # Each stream crashes after the sampled offsets it reaches, and only those.
    lengths = Counter(stream_for_key(str(f.key), streams) for f in inputs)
    # A stream's last offset is its end of input's, `lengths[stream]` (0 if no visitor's).
    reached = [p for i in range(streams) for p in range(0, 100, 25) if p <= lengths[i]]
    assert crashed.crashes == len(reached) > streams
    assert sorted(s.session_id for s in crashed.unique().sessions) == sorted(
        s.session_id for s in baseline.sessions
    )


def test_a_point_no_stream_can_reach_is_still_refused() -> None:
    inputs = traffic(10)  # 11 inputs with the end of input: offsets 0..10 at most
    with pytest.raises(ValueError, match="past the last offset any stream can have, 10"):
        run_with_crashes(Visits(), inputs, crash_at=[11], streams=4)
    run_with_crashes(Visits(), inputs, crash_at=[10], streams=1)  # the end of input's offset


def test_a_sample_that_crashes_nothing_is_refused() -> None:
    inputs = traffic(100)  # 4 streams of about 30 records: none reaches offset 90
    with pytest.raises(ValueError, match="no stream reaches an offset in crash_at"):
        run_with_crashes(Visits(), inputs, crash_at=[90], streams=4)
