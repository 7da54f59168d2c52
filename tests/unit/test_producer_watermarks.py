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


DAY = 24 * 60 * MINUTE
YEAR_2100 = 4_102_444_800_000


def _watermarks_of(policy: WatermarkPolicy, events: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """(stream, watermark time) of every watermark the events make, in order."""
    return [(s, policy.clock_ms) for e in events for s in policy.fragment(*e)]


def test_one_fragment_dated_far_ahead_does_not_hold_the_clock_there() -> None:
    # Stream 0 has traffic every 10 s for an hour, stream 1 is idle: it gets a watermark per
    # interval.  One line of a broken clock (stream 2, dated 2100) must not stop them: before
    # this rule the clock stayed in 2100 and the producer wrote no watermark again.
    before = [(0, 1_000_000 + i * 10_000) for i in range(180)]
    after = [(0, 1_000_000 + i * 10_000) for i in range(180, 360)]
    clean = _watermarks_of(WatermarkPolicy(3, MINUTE), before + after)
    policy = WatermarkPolicy(3, MINUTE)
    broken = _watermarks_of(policy, [*before, (2, YEAR_2100), *after])
    assert broken == clean
    assert policy.clock_ms == after[-1][1]
    assert len([w for w in broken if w[0] == 1]) > 50  # stream 1 kept getting them


def test_a_jump_the_next_fragment_confirms_is_taken_one_fragment_later() -> None:
    # A real gap in the input (three days): the first fragment after it waits for the second.
    policy = WatermarkPolicy(3, MINUTE)
    policy.fragment(0, 1_000_000)
    gap = 1_000_000 + 3 * DAY
    assert policy.fragment(0, gap) == ()
    assert policy.clock_ms == 1_000_000 and policy.stream_time(0) == 1_000_000
    assert list(policy.fragment(1, gap + 5_000)) == [2]  # the idle one, behind the new clock
    assert policy.clock_ms == gap + 5_000
    assert policy.stream_time(0) == gap  # its own fragment, taken with the witness
    assert policy.stream_time(2) == gap + 5_000  # its watermark, at the clock


def test_a_jump_confirmed_by_a_fragment_a_little_behind_it_moves_the_clock_to_the_jump() -> None:
    policy = WatermarkPolicy(2, MINUTE)
    policy.fragment(0, 1_000_000)
    policy.fragment(0, 1_000_000 + 2 * DAY)
    assert list(policy.fragment(1, 1_000_000 + 2 * DAY - 10_000)) == []
    assert policy.clock_ms == 1_000_000 + 2 * DAY
    assert policy.stream_time(0) == 1_000_000 + 2 * DAY


def test_two_jumps_in_a_row_each_wait_for_their_witness() -> None:
    policy = WatermarkPolicy(2, MINUTE)
    policy.fragment(0, 1_000_000)
    policy.fragment(0, 1_000_000 + 2 * DAY)  # parked
    policy.fragment(1, 1_000_000 + 2 * DAY + 1_000)  # confirms it
    assert policy.fragment(0, 1_000_000 + 5 * DAY) == ()  # parked in turn
    assert policy.clock_ms == 1_000_000 + 2 * DAY + 1_000
    policy.fragment(1, 1_000_000 + 2 * DAY + 2_000)  # refutes it: far behind
    assert policy.clock_ms == 1_000_000 + 2 * DAY + 2_000


def test_without_a_lead_every_jump_is_taken_at_once() -> None:
    policy = WatermarkPolicy(3, MINUTE, max_lead_ms=None)
    policy.fragment(0, 1_000_000)
    assert list(policy.fragment(2, YEAR_2100)) == [0, 1]
    assert policy.clock_ms == YEAR_2100


def test_a_lead_below_one_millisecond_is_refused() -> None:
    with pytest.raises(ValueError, match="max_lead_ms"):
        WatermarkPolicy(1, MINUTE, max_lead_ms=0)
