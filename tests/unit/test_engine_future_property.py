"""The far-future policy and truncation, by property over random streams with outliers.

(a) With a few records dated far ahead (fragments and watermarks) and a few genuine
    gaps, the engine rejects exactly what a plain model of the documented policy
    rejects, and its sessions equal the batch definition of the fragments it neither
    rejected nor found late.
(b) Crashing anywhere, with the last commit anywhere before, and resuming a fresh
    engine from the stored bytes gives exactly the uninterrupted run's output:
    sessions (truncated ones included, with a small ignore-list budget) and dead
    letters alike.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from hypothesis import event, given, settings
from hypothesis import strategies as st

from framework.testing.offset_streams import steps
from framework.testkit.engine_runs import (
    OffsetScenario,
    batch_identity,
    fragment_at,
    run_engine_with_crashes,
    session_identity,
)
from sessionizer import (
    EngineOutput,
    FinishedSession,
    Fragment,
    LateFragment,
    Record,
    SessionEngine,
    Watermark,
    batch_sessions,
)
from sessionizer.records import FutureFragment
from state.tracker import IGNORE_LIST_BUDGET_BYTES

STREAM = "app.stream.0009"

# Kinds of `steps`: 0 = watermark, 1-2 = END fragment, 3-10 = fragment, 11 = far-future
# fragment, 12 = far-future watermark, 13 = a genuine gap (the clock jumps past max_lead)
# before a fragment.
KINDS = 13


@st.composite
def scenarios(draw: st.DrawFn, *, ends_input: bool | None = None) -> OffsetScenario:
    """Draw a stream; fragments may be late, a few are dated far ahead."""
    timeout, grace = draw(st.integers(1, 6)), draw(st.integers(0, 4))
    max_ms = draw(st.none() | st.integers(3, 20))
    lead = draw(st.integers(5, 30))
    clock, offset = 1_000, 0
    records: list[Record] = []
    for advance, step, key, lag, kind in draw(steps(KINDS, 60)):
        clock += advance
        ts = clock - lag % (grace + 3)  # now and then late, mostly not
        if kind == 13:
            clock += lead + 1 + lag
            ts = clock
        elif kind in (11, 12):
            ts = clock + lead + 1 + draw(st.integers(0, 1_000), label="ahead")
        if kind in (0, 12):
            records.append(Watermark(ts, offset=offset))
        else:
            records.append(fragment_at(offset, f"k{key}", ts, end=kind <= 2))
        offset += step
    if ends_input if ends_input is not None else draw(st.booleans()):
        end = clock + draw(st.sampled_from([0, 0, lead + 1]), label="end ahead")
        records.append(Watermark(end, end=True, offset=offset))
    return OffsetScenario(timeout, grace, max_ms, tuple(records), lead_ms=lead)


@dataclass
class Verdicts:
    """What the model of the policy says about a stream."""

    late: set[int]
    future: set[int]
    rejected: int
    """Records the policy rejected: fragments, watermarks, and far end-of-input times."""


def model(scenario: OffsetScenario) -> Verdicts:
    """The documented policy, written as plainly as possible (no sessions, only times)."""
    verdicts = Verdicts(set(), set(), 0)
    stream_time: int | None = None
    parked: Record | None = None

    def apply(record: Record) -> None:
        nonlocal stream_time
        ts = record.timestamp_ms
        if stream_time is not None and ts < stream_time - scenario.grace_ms:
            if isinstance(record, Fragment):
                verdicts.late.add(record.offset)
            return
        stream_time = ts if stream_time is None else max(stream_time, ts)

    for record in scenario.records:
        ts = record.timestamp_ms
        if parked is not None:
            if parked.timestamp_ms - ts <= scenario.lead_ms:
                apply(parked)  # confirmed: the next record is not far behind it
            else:
                verdicts.rejected += 1
                if isinstance(parked, Fragment):
                    verdicts.future.add(parked.offset)
            parked = None
        ahead = stream_time is not None and ts - stream_time > scenario.lead_ms
        if isinstance(record, Watermark) and record.end_of_input:
            if ahead:
                verdicts.rejected += 1
            else:
                apply(record)
        elif ahead:
            parked = record
        else:
            apply(record)
    return verdicts


def _dead_letters(outputs: Iterable[EngineOutput]) -> set[tuple[str, int]]:
    return {(type(o).__name__, o.fragment.offset) for o in outputs if isinstance(o, LateFragment)}


@settings(max_examples=600, deadline=None)
@given(scenarios(ends_input=True))
def test_rejections_follow_the_policy_and_the_rest_equals_the_batch_definition(
    scenario: OffsetScenario,
) -> None:
    engine = SessionEngine(STREAM, scenario.processor())
    outputs = [o for r in scenario.records for o in engine.process(r)]
    verdicts = model(scenario)
    future = {o.fragment.offset for o in outputs if isinstance(o, FutureFragment)}
    late = {o.fragment.offset for o in outputs if type(o) is LateFragment}
    assert (future, late) == (verdicts.future, verdicts.late)
    assert engine.counters.future == verdicts.rejected
    kept = [
        r
        for r in scenario.records
        if isinstance(r, Fragment) and r.offset not in verdicts.future | verdicts.late
    ]
    batch = batch_sessions(
        kept, scenario.timeout_ms, scenario.processor().is_end, max_duration_ms=scenario.max_ms
    )
    sessions = [session_identity(o) for o in outputs if isinstance(o, FinishedSession)]
    assert sorted(sessions) == sorted(batch_identity(b, STREAM) for b in batch)
    assert engine.counters.open_sessions == 0 and engine.counters.truncated == 0
    event(f"rejected: {min(verdicts.rejected, 2)}, future fragments: {min(len(future), 2)}")


@settings(max_examples=800, deadline=None)
@given(scenarios(), st.sampled_from([IGNORE_LIST_BUDGET_BYTES, 41, 90]), st.data())
def test_crash_and_resume_gives_exactly_the_uninterrupted_output(
    scenario: OffsetScenario, budget: int, data: st.DataObject
) -> None:
    engine = SessionEngine(STREAM, scenario.processor(), ignore_budget_bytes=budget)
    uninterrupted = [o for r in scenario.records for o in engine.process(r)]
    run = run_engine_with_crashes(
        STREAM,
        scenario.records,
        scenario.processor,
        crashes=data.draw(st.integers(1, 3), label="crashes"),
        choose=lambda lo, hi: data.draw(st.integers(lo, hi)),
        ignore_budget_bytes=budget,
    )
    expected = {
        (session_identity(o), o.truncated) for o in uninterrupted if isinstance(o, FinishedSession)
    }
    durable = [
        (session_identity(o), o.truncated) for o in run.committed if isinstance(o, FinishedSession)
    ]
    assert len(durable) == len(set(durable)), "a committed session was emitted again"
    assert set(durable) == expected, "the durable output differs from the uninterrupted run"
    at_risk = {
        (session_identity(o), o.truncated) for o in run.at_risk if isinstance(o, FinishedSession)
    }
    assert at_risk <= expected, "a duplicate differs"
    event(f"truncated: {min(engine.counters.truncated, 2)}, future: {engine.counters.future > 0}")
    # Dead letters (late and future fragments) reach the output at least once, none invented.
    assert _dead_letters(run.committed) == _dead_letters(uninterrupted)
    assert _dead_letters(run.at_risk) <= _dead_letters(uninterrupted)


@settings(max_examples=300, deadline=None)
@given(scenarios(), st.integers(0, 2**32 - 1))
def test_judging_a_parked_record_before_a_record_changes_nothing_it_then_does(
    scenario: OffsetScenario, choice: int
) -> None:
    """`judge_parked_by(record)` then `process(record)` (a resize acts on the verdict between
    the two: docs/resize.md) gives the outputs and state `process(record)` gives alone."""
    alone = SessionEngine(STREAM, scenario.processor())
    judged = SessionEngine(STREAM, scenario.processor())
    for index, record in enumerate(scenario.records):
        expected = alone.process(record)
        early = judged.judge_parked_by(record) if (choice >> index % 32) & 1 else []
        event("judged a parked record" if early else "nothing judged")
        assert early + judged.process(record) == expected
        assert judged.parked_offset == alone.parked_offset and record.offset is not None
        assert judged.snapshot(record.offset + 1) == alone.snapshot(record.offset + 1)
