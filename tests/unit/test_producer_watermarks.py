"""The producer's watermark policy, pure: event times in, watermarked streams out."""

from __future__ import annotations

import random
from functools import cache
from itertools import islice

import pytest

from router.generator import generate_fragments
from router.hashing import stream_for_key
from router.producer import DEFAULT_WATERMARK_INTERVAL_MS
from router.watermarks import WatermarkPolicy

MINUTE = 60_000


def _replay(
    events: list[tuple[int, int]], streams: int, interval_ms: int
) -> tuple[list[tuple[int, int, int]], int]:
    """Feed (stream, time) events; return every (after event i, stream, watermark time), and
    check the bound after every event: no stream more than an interval behind the clock."""
    policy = WatermarkPolicy(streams, interval_ms)
    watermarks: list[tuple[int, int, int]] = []
    for i, (stream, timestamp) in enumerate(events):
        for lagging in policy.fragment(stream, timestamp):
            watermarks.append((i, lagging, policy.clock_ms))
        behind = [
            s for s in range(streams) if policy.clock_ms - policy.stream_time(s) > interval_ms
        ]
        assert not behind, f"after event {i} streams {behind} lag by more than the interval"
    return watermarks, len(events)


@cache
def _traffic(fragments: int, seed: int = 7) -> tuple[tuple[str, int], ...]:
    generated = generate_fragments(fragments // 3 + 50, seed=seed)
    return tuple((f.key, f.timestamp_ms) for f in islice(generated, fragments))


def _generated(fragments: int, streams: int) -> list[tuple[int, int]]:
    return [(stream_for_key(key, streams), t) for key, t in _traffic(fragments)]


def test_a_stream_with_traffic_every_interval_never_gets_a_watermark() -> None:
    # Two streams, each with a fragment every 50 s (interval 60 s): always within the bound.
    events = [(i % 2, i * 25_000) for i in range(200)]
    watermarks, _ = _replay(events, 2, MINUTE)
    assert watermarks == []


def test_an_idle_stream_gets_one_watermark_per_interval_at_the_producers_clock() -> None:
    events = [(0, t * 10_000) for t in range(0, 61)]  # stream 1 idle for 10 minutes
    watermarks, _ = _replay(events, 2, MINUTE)
    assert [(s, t) for _, s, t in watermarks] == [(1, t) for t in range(70_000, 600_001, 70_000)]


def test_a_stream_that_never_had_a_fragment_starts_at_the_first_event_time() -> None:
    policy = WatermarkPolicy(3, MINUTE)
    assert policy.fragment(0, 1_000_000) == ()
    assert policy.fragment(0, 1_000_000 + MINUTE) == ()  # exactly an interval: not behind
    assert list(policy.fragment(0, 1_000_000 + MINUTE + 1)) == [1, 2]
    assert policy.stream_time(1) == policy.stream_time(2) == 1_000_000 + MINUTE + 1


def test_out_of_order_fragments_do_not_move_the_clock_back() -> None:
    policy = WatermarkPolicy(2, MINUTE)
    policy.fragment(0, 500_000)
    assert policy.fragment(1, 100_000) == ()
    assert policy.clock_ms == 500_000
    assert policy.stream_time(1) == 500_000  # started at the first event time


def test_the_policy_is_deterministic_whatever_else_happens() -> None:
    events = _generated(5_000, 16)
    assert _replay(events, 16, MINUTE) == _replay(list(events), 16, MINUTE)


@pytest.mark.parametrize("streams", [16, 64])
def test_generated_traffic_at_the_default_interval_writes_under_five_percent(streams: int) -> None:
    # 100,000 fragments: about 30 hours of event time at the generator's steady rate.
    policy = WatermarkPolicy(streams, DEFAULT_WATERMARK_INTERVAL_MS)
    events = _generated(100_000, streams)
    watermarks = sum(len(policy.fragment(stream, timestamp)) for stream, timestamp in events)
    assert 0 < watermarks <= 0.05 * (len(events) + watermarks)


def test_random_clocks_stay_within_the_bound_with_few_watermarks() -> None:
    rng = random.Random(11)
    streams, clock, events = 8, 1_000_000, []
    for _ in range(3_000):
        clock += rng.choice((0, 1_000, 5_000, 90_000, 400_000))
        jitter = rng.randrange(0, 30_000)  # a little disorder, as real logs have
        events.append((rng.randrange(streams), max(0, clock - jitter)))
    watermarks, _ = _replay(events, streams, MINUTE)
    # At most one watermark per stream for each interval the clock moved.
    assert len(watermarks) <= streams * ((clock - 1_000_000) // MINUTE + 1)


def test_a_shorter_interval_writes_more_watermarks() -> None:
    events = _generated(5_000, 16)
    counts = [len(_replay(events, 16, seconds * 1000)[0]) for seconds in (60, 300, 3600)]
    assert counts[0] > counts[1] > counts[2]


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="num_streams"):
        WatermarkPolicy(0, MINUTE)
    with pytest.raises(ValueError, match="interval_ms"):
        WatermarkPolicy(1, 0)
