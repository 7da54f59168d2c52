"""Several producers on one stream: stream time waits for the slowest, end of input for the last.

In-process (no servers): `ProducerClocks` alone, the engine over hand-made and
random interleavings of two producers, and crash/resume from the stored state
record giving the uninterrupted run's output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.kernel.watermark import JOINED, LEFT, Watermark
from framework.testing.engine_checks import check_sessions_of_batch
from framework.testkit.engine_runs import (
    OffsetRecorder,
    fragment_at,
    run_engine,
    run_engine_with_crashes,
    session_identity,
)
from sessionizer import (
    FinishedSession,
    Fragment,
    LateFragment,
    Record,
    SessionEngine,
    batch_sessions,
)
from sessionizer.errors import ProcessorError
from sessionizer.handover import export_engine, restore_engine
from sessionizer.producer_clocks import ProducerClocks, skew_ms
from state.record import StreamState

STREAM = "app.stream.0003"


class Skewed(OffsetRecorder):
    """`OffsetRecorder` with a `max_producer_skew` (milliseconds here; None: unbounded)."""

    def __init__(
        self, timeout_ms: int, grace_ms: int, skew: int | None, lead: int | None = 86_400_000
    ) -> None:
        super().__init__(timeout_ms, grace_ms, lead_ms=lead)
        self.max_producer_skew = None if skew is None else skew / 1000


def mark(
    offset: int, producer: str, time: int = 0, *, end: bool = False, marker: Any = None
) -> Watermark:
    """A producer's watermark (or marker) record."""
    return Watermark(time, end, offset, producer, marker)


# --- ProducerClocks alone ---------------------------------------------------------------


def test_one_producer_moves_stream_time_as_before() -> None:
    clocks = ProducerClocks(skew_ms=None)
    assert clocks.watermark(0, "a", JOINED, 0, False) == (None, False)
    assert clocks.fragment(500) == 500
    assert clocks.watermark(1, "a", None, 600, False) == (600, False)
    assert clocks.watermark(2, "a", None, 700, True) == (700, True)


def test_two_producers_wait_for_the_slowest_within_the_skew() -> None:
    clocks = ProducerClocks(skew_ms=1000)
    clocks.watermark(0, "a", JOINED, 0, False)
    clocks.watermark(1, "b", JOINED, 0, False)
    assert clocks.several
    assert clocks.fragment(5000) == 4000  # nobody's clock yet: only the skew bound
    assert clocks.watermark(2, "a", None, 5000, False) == (4000, False)  # b has no clock
    # What each record allows; the engine keeps the running max (4000 here).
    assert clocks.watermark(3, "b", None, 3000, False) == (3000, False)
    assert clocks.watermark(4, "b", None, 4800, False) == (4800, False)  # min(a, b) = b
    assert clocks.lead_reference(4800) == 5000
    # a ends first: b is live, so this is no end of input; b's clock holds.
    assert clocks.watermark(5, "a", None, 9000, True) == (8000, False)
    assert not clocks.several
    assert clocks.watermark(6, "b", None, 8500, True) == (8500, True)


def test_a_left_producer_no_longer_holds_the_stream_and_never_ends_the_input() -> None:
    clocks = ProducerClocks(skew_ms=None)
    for offset, name in enumerate("abc"):
        clocks.watermark(offset, name, JOINED, 100, False)
    assert clocks.watermark(3, "a", None, 900, False) == (100, False)
    assert clocks.watermark(4, "b", LEFT, 100, False) == (100, False)
    assert clocks.watermark(5, "c", None, 800, False) == (800, False)
    assert clocks.watermark(6, "x", LEFT, 5, False) == (None, False)  # not live: nothing
    assert clocks.watermark(7, "a", None, 950, True) == (800, False)
    assert clocks.watermark(8, "c", LEFT, 800, False) == (None, False)  # left, not ended
    assert clocks.watermark(9, None, None, 990, True) == (990, True)


def test_the_anonymous_end_ends_only_a_stream_without_live_producers() -> None:
    clocks = ProducerClocks(skew_ms=None)
    clocks.watermark(0, "a", JOINED, 0, False)
    assert clocks.watermark(1, None, None, 50, True) == (50, False)  # like a fragment
    assert clocks.watermark(2, "a", None, 60, True) == (60, True)
    assert clocks.watermark(3, None, None, 70, True) == (70, True)


def test_saved_before_gives_the_live_producers_as_of_an_offset_and_exports_round_trip() -> None:
    clocks = ProducerClocks(skew_ms=None, live=(("a", 10),))
    clocks.watermark(5, "b", JOINED, 0, False)
    clocks.watermark(9, "a", None, 20, False)
    data = clocks.export_state()
    assert clocks.saved_before(5) == (("a", 10),)
    assert clocks.saved_before(9) == (("a", 10), ("b", None))
    assert clocks.saved_before(10) == (("a", 20), ("b", None))
    restored = ProducerClocks.restore_state(data, None)
    assert restored.export_state() == data
    assert restored.saved_before(6) == (("a", 10), ("b", None))


@pytest.mark.parametrize("bad", [-1, float("inf"), "1", True])
def test_a_bad_skew_names_the_processor(bad: object) -> None:
    processor = Skewed(10, 0, None)
    processor.max_producer_skew = bad  # type: ignore[assignment]
    with pytest.raises(ProcessorError, match=r"Skewed\.max_producer_skew"):
        skew_ms(processor)


def test_the_state_record_carries_the_live_producers_and_reads_old_records() -> None:
    state = StreamState("s", producers=(("a", 5), ("b", None)))
    assert StreamState.decode(state.encode(), stream="s") == state
    old = StreamState("s").encode()
    assert b"producers" not in old
    assert StreamState.decode(old, stream="s").producers == ()
    with pytest.raises(ValueError, match="sorted"):
        StreamState("s", producers=(("b", 5), ("a", None)))


# --- the engine ---------------------------------------------------------------------------


def test_the_first_producers_end_leaves_the_others_sessions_open() -> None:
    records: list[Record] = [
        mark(0, "fast", marker=JOINED),
        mark(1, "slow", marker=JOINED),
        fragment_at(2, "k", 1000),  # slow
        fragment_at(3, "k", 50_000),  # fast, far ahead
        mark(4, "fast", 50_000),
        mark(5, "fast", 60_000, end=True),  # fast ends first
        fragment_at(6, "k", 1500),  # slow: on time, same session
        mark(7, "slow", 2000),
        fragment_at(8, "k", 2500),  # slow
        mark(9, "slow", 3000, end=True),
    ]
    sessions, late, engine = run_engine(STREAM, records, Skewed(10_000, 100, None))
    assert late == []
    assert engine.counters.open_sessions == 0
    assert [session.result["offsets"] for session in sessions] == [(2, 6, 8), (3,)]


def test_a_producer_that_stopped_without_ending_leaves_the_next_run_to_end_the_input() -> None:
    # `produce part1` (stops: its own `left`), then `produce part2 --end-of-input`.
    records: list[Record] = [
        mark(0, "run1", marker=JOINED),
        fragment_at(1, "k", 1000),
        mark(2, "run1", 1000, marker=LEFT),
        mark(3, "run2", marker=JOINED),
        fragment_at(4, "k", 2000),
        mark(5, "run2", 2000, end=True),
    ]
    sessions, late, engine = run_engine(STREAM, records, Skewed(10_000, 0, 3_600_000))
    assert late == [] and engine.counters.open_sessions == 0
    assert [session.result["offsets"] for session in sessions] == [(1, 4)]


def test_a_late_fragment_of_one_producer_is_still_late() -> None:
    records: list[Record] = [
        mark(0, "a", marker=JOINED),
        mark(1, "b", marker=JOINED),
        mark(2, "a", 10_000),
        mark(3, "b", 10_000),
        fragment_at(4, "k", 9_000),  # more than the grace behind both clocks
    ]
    _sessions, late, _engine = run_engine(STREAM, records, Skewed(10_000, 100, None))
    assert [item.fragment.offset for item in late] == [4]


def test_the_skew_bounds_how_far_a_stalled_producer_holds_stream_time() -> None:
    records: list[Record] = [
        mark(0, "a", marker=JOINED),
        mark(1, "b", marker=JOINED),
        mark(2, "b", 1000),
        fragment_at(3, "k", 1000),
        mark(4, "a", 100_000),  # b stalls at 1000; stream time = 100_000 - skew
    ]
    sessions, _late, engine = run_engine(STREAM, records, Skewed(5_000, 0, 30_000))
    assert engine.stream_time_ms == 70_000
    assert [session.key for session in sessions] == ["k"]


# --- by property: two producers, random interleavings ------------------------------------


@dataclass(frozen=True)
class TwoProducers:
    """Two producers' records merged in some order, and the processor settings."""

    timeout_ms: int
    grace_ms: int
    skew: int | None
    lead: int | None
    records: tuple[Record, ...]
    ends: bool

    def processor(self) -> Skewed:
        """A fresh processor with these settings."""
        return Skewed(self.timeout_ms, self.grace_ms, self.skew, self.lead)


# (clock advance, key, lag within the grace, kind: 0 = watermark at the clock, 1 = END fragment).
# A rare jump of 60 makes records park when `max_lead` is drawn small.
_ADVANCE = st.sampled_from([0, 0, 1, 1, 2, 3, 4, 60])
_STEP = st.tuples(_ADVANCE, st.integers(0, 2), st.integers(0, 10), st.integers(0, 7))


@st.composite
def two_producers(draw: st.DrawFn, *, bounded: bool) -> TwoProducers:
    """Each producer's fragments lag its own clock by at most the grace; its watermarks carry it."""
    timeout, grace = draw(st.integers(1, 8)), draw(st.integers(0, 4))
    skew = draw(st.integers(0, 30)) if bounded else None
    # Parking (a jump over `max_lead`) makes fragments late or future: only when bounded.
    lead = draw(st.sampled_from([None, 20, 45, 86_400_000])) if bounded else None
    ends = draw(st.booleans())
    lanes: list[list[tuple[str, int, int, int]]] = []  # (producer, clock, key, ...) per lane
    for name in ("a", "b"):
        clock, lane = draw(st.integers(1000, 1020)), []
        for advance, key, lag, kind in draw(st.lists(_STEP, max_size=40)):
            clock += advance
            lane.append(
                (name, clock, key, -1 if kind == 0 else lag % (grace + 1) + 100 * (kind == 1))
            )
        lanes.append(lane)
    # The merge: which lane's next item comes next.
    order = draw(
        st.lists(
            st.booleans(),
            min_size=len(lanes[0]) + len(lanes[1]),
            max_size=len(lanes[0]) + len(lanes[1]),
        )
    )
    records: list[Record] = [mark(0, "a", marker=JOINED), mark(1, "b", marker=JOINED)]
    offset, heads, clocks = 2, [0, 0], [0, 0]
    for pick in order:
        lane = int(pick) if heads[int(pick)] < len(lanes[int(pick)]) else 1 - int(pick)
        name, clock, key, code = lanes[lane][heads[lane]]
        heads[lane] += 1
        clocks[lane] = clock
        if code < 0:
            records.append(mark(offset, name, clock))
        else:
            records.append(fragment_at(offset, f"k{key}", clock - code % 100, end=code >= 100))
        offset += 1
    if ends:
        records.append(mark(offset, "a", max(clocks[0], 0), end=True))
        records.append(mark(offset + 1, "b", max(clocks[1], 0), end=True))
    return TwoProducers(timeout, grace, skew, lead, tuple(records), ends)


@settings(max_examples=300, deadline=None)
@given(two_producers(bounded=False))
def test_without_a_bound_no_fragment_is_late_and_the_sessions_are_the_batch_definition(
    case: TwoProducers,
) -> None:
    sessions, late, engine = run_engine(STREAM, case.records, case.processor())
    assert late == []
    fragments = [r for r in case.records if isinstance(r, Fragment)]
    batch = batch_sessions(fragments, case.timeout_ms, case.processor().is_end)
    check_sessions_of_batch(STREAM, sessions, engine, batch, complete=case.ends)


@settings(max_examples=300, deadline=None)
@given(st.booleans().flatmap(lambda bounded: two_producers(bounded=bounded)), st.data())
def test_resuming_from_the_stored_record_gives_the_uninterrupted_output(
    case: TwoProducers, data: st.DataObject
) -> None:
    engine = SessionEngine(STREAM, case.processor())
    uninterrupted = [output for record in case.records for output in engine.process(record)]
    expected = {session_identity(o) for o in uninterrupted if isinstance(o, FinishedSession)}
    run = run_engine_with_crashes(
        STREAM,
        case.records,
        case.processor,
        crashes=data.draw(st.integers(1, 3), label="crashes"),
        choose=lambda lo, hi: data.draw(st.integers(lo, hi)),
    )
    durable = [session_identity(o) for o in run.committed if isinstance(o, FinishedSession)]
    assert len(durable) == len(set(durable))
    assert set(durable) == expected
    late = {o.fragment.offset for o in uninterrupted if isinstance(o, LateFragment)}
    assert {o.fragment.offset for o in run.committed if isinstance(o, LateFragment)} == late


@settings(max_examples=150, deadline=None)
@given(st.booleans().flatmap(lambda bounded: two_producers(bounded=bounded)), st.data())
def test_a_handover_carries_the_producers_and_changes_nothing(
    case: TwoProducers, data: st.DataObject
) -> None:
    engine = SessionEngine(STREAM, case.processor())
    uninterrupted = [output for record in case.records for output in engine.process(record)]
    cut = data.draw(st.integers(0, len(case.records)), label="cut")
    first = SessionEngine(STREAM, case.processor())
    outputs = [output for record in case.records[:cut] for output in first.process(record)]
    next_offset = case.records[cut - 1].offset + 1 if cut else 0  # type: ignore[operator]
    state = StreamState.decode(first.snapshot(next_offset).encode(), stream=STREAM)
    second = restore_engine(case.processor(), state, export_engine(first))
    outputs += [output for record in case.records[cut:] for output in second.process(record)]
    assert outputs == uninterrupted
