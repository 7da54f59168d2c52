"""SessionEngine against implausible input: invalid event times and far-future records (issue 12).

- a `timestamp()` hook result outside [MIN_EVENT_TIME_MS, MAX_EVENT_TIME_MS] is a dead
  letter (it used to decode fine and make the state unencodable at the next commit);
- one record dated far ahead is parked until the next record confirms or refutes it (it
  used to make every later fragment of its stream late);
- the processor's new attributes and defaults.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pytest

from framework.kernel.limits import MAX_EVENT_TIME_MS, MIN_EVENT_TIME_MS
from framework.testkit.engine_runs import DefaultTimings, OffsetRecorder, fragment_at
from sessionizer import (
    FinishedSession,
    HookFailure,
    LateFragment,
    ProcessorError,
    SessionEngine,
    Timing,
    Watermark,
)
from sessionizer.examples import SshConnections, WebSessions
from sessionizer.records import FutureFragment
from state import DEFAULT_LIMIT_BYTES, StreamState

STREAM = "app.stream.0001"
T = 1_700_000_000_000  # 2023-11-14
YEAR_2100 = 4_102_444_800_000
MINUTE = 60_000
DAY_MS = 24 * 3600 * 1000
"""`StreamProcessor.max_lead`'s default, in ms."""


def _run(engine: SessionEngine, records: list[Any]) -> list[Any]:
    return [output for record in records for output in engine.process(record)]


def _offsets(outputs: list[Any]) -> list[tuple[int, ...]]:
    return [o.result["offsets"] for o in outputs if isinstance(o, FinishedSession)]


def _engine(**kwargs: Any) -> SessionEngine:
    return SessionEngine(STREAM, OffsetRecorder(timeout_ms=30 * MINUTE, grace_ms=MINUTE, **kwargs))


class _Stamps(OffsetRecorder):
    """Takes each fragment's event time from its field "ts" (any value at all)."""

    def timestamp(self, fragment: Mapping[str, Any], record_timestamp_ms: int) -> Any:
        return fragment.get("ts", record_timestamp_ms)


# -- event times from the timestamp() hook ---------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        2**63,
        2**64,
        1e300,
        MAX_EVENT_TIME_MS + 1,
        MIN_EVENT_TIME_MS - 1,
        -1e18,
        math.inf,
        math.nan,
        True,
        "1700000000000",
        None,
    ],
)
def test_timestamp_hook_result_outside_the_valid_range_is_a_dead_letter(value: object) -> None:
    engine = SessionEngine(STREAM, _Stamps(timeout_ms=1_000))
    poisoned = fragment_at(1, "b", T)
    poisoned.value["ts"] = value
    outputs = _run(engine, [fragment_at(0, "a", T), poisoned, fragment_at(2, "c", T + 10)])
    [failure] = outputs
    assert isinstance(failure, HookFailure)
    assert (failure.fragment.offset, failure.hook, failure.session_id) == (1, "timestamp", None)
    assert engine.stream_time_ms == T + 10  # it moved nothing
    assert engine.counters.hook_failures == 1
    # The state encodes, which is what failed before (OverflowError at the commit).
    engine.snapshot(3).encode(limit=DEFAULT_LIMIT_BYTES)


def test_timestamp_hook_may_return_the_range_bounds_and_floats() -> None:
    engine = SessionEngine(STREAM, _Stamps(timeout_ms=1_000, lead_ms=None))
    records = [fragment_at(0, "a", 0), fragment_at(1, "b", 0), fragment_at(2, "c", 0)]
    for record, ts in zip(records, [MIN_EVENT_TIME_MS, 12.7, MAX_EVENT_TIME_MS], strict=True):
        record.value["ts"] = ts
    outputs = _run(engine, records)
    assert [(o.key, o.first_ts) for o in outputs] == [("a", 0), ("b", 12)]
    assert engine.stream_time_ms == MAX_EVENT_TIME_MS
    engine.process(Watermark(MAX_EVENT_TIME_MS, end=True, offset=3))
    state = StreamState.decode(engine.snapshot(4).encode(), stream=STREAM)
    assert state.stream_time_ms == MAX_EVENT_TIME_MS


def test_watermark_outside_the_valid_range_is_ignored_and_counted() -> None:
    engine = _engine()
    _run(engine, [fragment_at(0, "a", T), Watermark(2**70, offset=1), Watermark(-5, offset=2)])
    assert engine.stream_time_ms == T
    assert engine.counters.invalid_watermarks == 2
    # An end of input still closes everything, whatever its time.
    [closed] = engine.process(Watermark(2**70, end=True, offset=3))
    assert isinstance(closed, FinishedSession) and closed.key == "a"
    engine.snapshot(4).encode(limit=DEFAULT_LIMIT_BYTES)


# -- far-future records: parked, then confirmed or refuted -----------------------------------


def test_one_fragment_dated_2100_does_not_make_the_rest_of_its_stream_late() -> None:
    engine = _engine()
    records = [
        fragment_at(0, "a", T),
        fragment_at(1, "b", YEAR_2100),
        fragment_at(2, "a", T + 1_000),
    ]
    outputs = _run(engine, records)
    [future] = outputs
    assert isinstance(future, FutureFragment) and isinstance(future, LateFragment)
    assert (future.fragment.offset, future.event_time_ms, future.stream_time_ms) == (
        1,
        YEAR_2100,
        T,
    )
    assert future.reason.startswith("future: event time 4102444800000 was more than")
    assert f"max_lead of {DAY_MS} ms" in future.reason and f"time {T + 1_000} is" in future.reason
    assert engine.stream_time_ms == T + 1_000
    outputs = _run(
        engine, [fragment_at(3, "c", T + 2_000), Watermark(T + 2_000, end=True, offset=4)]
    )
    assert _offsets(outputs) == [(0, 2), (3,)]
    counters = engine.counters
    assert (counters.future, counters.late, counters.sessions) == (1, 0, 2)


def test_a_genuine_gap_is_confirmed_by_the_next_record() -> None:
    engine = _engine()
    gap = 3 * DAY_MS
    assert _run(engine, [fragment_at(0, "a", T), fragment_at(1, "b", T + gap)]) == []
    assert engine.stream_time_ms == T  # parked: it has not moved stream time yet
    # The next record lies within max_lead of it: the jump is real; "a" is over.
    outputs = _run(engine, [fragment_at(2, "b", T + gap + 5_000)])
    assert _offsets(outputs) == [(0,)]
    assert engine.stream_time_ms == T + gap + 5_000
    outputs = engine.process(Watermark(T + gap + 5_000, end=True, offset=3))
    assert _offsets(outputs) == [(1, 2)]
    assert engine.counters.future == 0


def test_the_next_record_may_confirm_from_below_within_max_lead() -> None:
    engine = _engine()
    ahead = T + 2 * DAY_MS
    records = [
        fragment_at(0, "a", T),
        Watermark(ahead, offset=1),
        fragment_at(2, "b", ahead - DAY_MS),
    ]
    outputs = _run(engine, records)
    assert _offsets(outputs) == [(0,)]  # the watermark was confirmed and closed "a"
    [late] = outputs[1:]
    assert isinstance(late, LateFragment) and not isinstance(late, FutureFragment)
    assert late.fragment.offset == 2  # behind the confirmed watermark by a day


def test_a_refuted_watermark_is_dropped_and_counted() -> None:
    engine = _engine()
    outputs = _run(
        engine,
        [fragment_at(0, "a", T), Watermark(YEAR_2100, offset=1), fragment_at(2, "a", T + 10)],
    )
    assert outputs == []
    assert (engine.stream_time_ms, engine.counters.future) == (T + 10, 1)
    outputs = engine.process(Watermark(T + 10, end=True, offset=3))
    assert _offsets(outputs) == [(0, 2)]


def test_a_parked_record_holds_the_safe_offset_and_a_replay_decides_alike() -> None:
    records = [
        fragment_at(0, "a", T),
        Watermark(T + 40 * MINUTE, offset=1),  # closes "a"
        fragment_at(2, "b", YEAR_2100),
        fragment_at(3, "c", T + 41 * MINUTE),
        Watermark(T + 41 * MINUTE, end=True, offset=4),
    ]
    engine = _engine()
    first = _run(engine, records[:3])
    assert _offsets(first) == [(0,)]
    state = engine.snapshot(3)
    assert (state.safe_offset, state.stream_time_ms, state.open_sessions) == (2, T + 40 * MINUTE, 0)
    rest = _run(engine, records[3:])
    resumed = SessionEngine(
        STREAM,
        OffsetRecorder(timeout_ms=30 * MINUTE, grace_ms=MINUTE),
        resume=StreamState.decode(state.encode(), stream=STREAM),
    )
    replay = _run(resumed, records[2:])
    assert replay == rest
    assert [type(o).__name__ for o in replay] == ["FutureFragment", "FinishedSession"]


def test_a_record_without_event_time_does_not_decide() -> None:
    engine = SessionEngine(STREAM, _Stamps(timeout_ms=30 * MINUTE))
    broken = fragment_at(2, "x", T)
    broken.value["ts"] = "not a time"
    outputs = _run(engine, [fragment_at(0, "a", T), fragment_at(1, "b", YEAR_2100), broken])
    assert [type(o).__name__ for o in outputs] == ["HookFailure"]
    assert engine.snapshot(3).safe_offset == 0  # "a" is open; the parked 1 is still held
    outputs = engine.process(fragment_at(3, "a", T + 5))
    assert [o.fragment.offset for o in outputs if isinstance(o, FutureFragment)] == [1]


def test_end_of_input_first_judges_the_parked_record() -> None:
    refuted = _engine()
    records = [
        fragment_at(0, "a", T),
        fragment_at(1, "b", YEAR_2100),
        Watermark(T, end=True, offset=2),
    ]
    outputs = _run(refuted, records)
    assert [type(o).__name__ for o in outputs] == ["FutureFragment", "FinishedSession"]
    confirmed = _engine()
    records[-1] = Watermark(YEAR_2100, end=True, offset=2)
    outputs = _run(confirmed, records)
    assert _offsets(outputs) == [(0,), (1,)]
    assert confirmed.stream_time_ms == YEAR_2100


def test_end_of_input_dated_far_ahead_closes_everything_but_moves_no_time() -> None:
    engine = _engine()
    outputs = _run(engine, [fragment_at(0, "a", T), Watermark(YEAR_2100, end=True, offset=1)])
    assert _offsets(outputs) == [(0,)]
    assert (engine.stream_time_ms, engine.counters.future) == (T, 1)
    # A second bounded input after it is judged against the first one's time, not 2100.
    outputs = _run(engine, [fragment_at(2, "a", T + 5), Watermark(T + 5, end=True, offset=3)])
    assert _offsets(outputs) == [(2,)]


def test_without_max_lead_a_jump_is_taken_at_once() -> None:
    engine = _engine(lead_ms=None)
    outputs = _run(
        engine, [fragment_at(0, "a", T), fragment_at(1, "b", YEAR_2100), fragment_at(2, "a", T + 1)]
    )
    assert [type(o).__name__ for o in outputs] == ["FinishedSession", "LateFragment"]


def test_the_first_record_of_a_stream_sets_its_time() -> None:
    # Nothing to measure it against: documented; the node's wire check bounds it.
    engine = _engine()
    assert _run(engine, [fragment_at(0, "a", YEAR_2100)]) == []
    assert engine.stream_time_ms == YEAR_2100


# -- processor attributes ----------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, -1, math.inf, math.nan, "1d", True])
def test_bad_max_lead_fails_at_class_definition(value: object) -> None:
    with pytest.raises(ProcessorError, match=r"Bad\.max_lead must be"):
        type("Bad", (OffsetRecorder,), {"max_lead": value})


def test_defaults_bound_sessions_and_leads_to_a_day() -> None:
    assert Timing.of(DefaultTimings) == Timing(30 * MINUTE, MINUTE, DAY_MS, DAY_MS)  # grace: 60 s
    off = type("Off", (DefaultTimings,), {"max_session_duration": None, "max_lead": None})
    assert Timing.of(off) == Timing(30 * MINUTE, MINUTE, None, None)


@pytest.mark.parametrize("example", [WebSessions, SshConnections])
def test_the_examples_set_max_session_duration_explicitly(example: type) -> None:
    assert example.__dict__["max_session_duration"] == 24 * 3600
