"""The core invariant, by property, over random interleavings of keys.

(a) The engine's sessions equal the batch definition of the same input (minus the
    fragments it reported late, which are exactly those behind stream time - grace).
(b) Crashing after any record, with the last commit at any earlier point, and
    resuming a fresh engine from the stored bytes at the safe offset gives, after
    de-duplication by session_id, exactly the uninterrupted run's sessions; the
    durable output has no duplicates at all, and a duplicate can only come from a
    session emitted between a crashed owner's last commit and its crash.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from framework.testing.engine_checks import check_sessions_of_batch
from framework.testing.offset_streams import steps
from framework.testkit.engine_runs import (
    OffsetRecorder,
    OffsetScenario,
    fragment_at,
    run_engine,
    run_engine_with_crashes,
    session_identity,
)
from sessionizer import (
    EngineOutput,
    FinishedSession,
    Fragment,
    HookFailure,
    LateFragment,
    Record,
    SessionEngine,
    Watermark,
    batch_sessions,
)
from sessionizer.records import FoldedHookFailure

STREAM = "app.stream.0007"

# Kinds of `steps`: 0 = watermark, 1-2 = END fragment, else fragment.
KINDS = 9


@st.composite
def scenarios(draw: st.DrawFn, *, late: bool) -> OffsetScenario:
    """Draw a stream; fragments lag the clock by at most `grace` unless `late`."""
    timeout, grace = draw(st.integers(1, 6)), draw(st.integers(0, 4))
    max_ms = draw(st.none() | st.integers(3, 20))
    clock, offset = 1_000, 0
    records: list[Record] = []
    for advance, step, key, lag, kind in draw(steps(KINDS, 80)):
        clock += advance
        # Every event time is <= clock, so lag <= grace keeps the fragment on time.
        ts = clock - (lag if late else lag % (grace + 1))
        if kind == 0:
            records.append(Watermark(ts, offset=offset))
        else:
            records.append(fragment_at(offset, f"k{key}", ts, end=kind <= 2))
        offset += step
    ends_input = draw(st.booleans())
    if ends_input:
        records.append(Watermark(clock, end=True, offset=offset))
    return OffsetScenario(timeout, grace, max_ms, tuple(records), ends_input=ends_input)


def _expected_late(scenario: OffsetScenario) -> set[int]:
    high: int | None = None
    late: set[int] = set()
    for record in scenario.records:
        behind = high is not None and record.timestamp_ms < high - scenario.grace_ms
        if isinstance(record, Fragment) and behind:
            late.add(record.offset)
        high = record.timestamp_ms if high is None else max(high, record.timestamp_ms)
    return late


def _check_against_batch(scenario: OffsetScenario) -> None:
    sessions, late, engine = run_engine(STREAM, scenario.records, scenario.processor())
    late_offsets = {output.fragment.offset for output in late}
    assert late_offsets == _expected_late(scenario)
    on_time = [
        r for r in scenario.records if isinstance(r, Fragment) and r.offset not in late_offsets
    ]
    batch = batch_sessions(
        on_time, scenario.timeout_ms, scenario.processor().is_end, max_duration_ms=scenario.max_ms
    )
    check_sessions_of_batch(STREAM, sessions, engine, batch, complete=scenario.ends_input)


@settings(max_examples=600, deadline=None)
@given(scenarios(late=False))
def test_engine_equals_batch_definition(scenario: OffsetScenario) -> None:
    assert not _expected_late(scenario)
    _check_against_batch(scenario)


@settings(max_examples=300, deadline=None)
@given(scenarios(late=True))
def test_engine_equals_batch_definition_of_the_on_time_fragments(scenario: OffsetScenario) -> None:
    _check_against_batch(scenario)


class Poisoned(OffsetRecorder):
    """A OffsetRecorder whose `is_end` or `update` raises on chosen offsets (field "o")."""

    def __init__(self, scenario: OffsetScenario, poison: Mapping[int, str]) -> None:
        super().__init__(scenario.timeout_ms, scenario.grace_ms, scenario.max_ms)
        self.poison = poison

    def is_end(self, fragment: Mapping[str, Any]) -> bool:
        if self.poison.get(fragment["o"]) == "is_end":
            raise ValueError("poisoned is_end")
        return super().is_end(fragment)

    def update(self, session: dict[str, Any], fragment: Mapping[str, Any]) -> None:
        if self.poison.get(fragment["o"]) == "update":
            raise ValueError("poisoned update")
        super().update(session, fragment)


def _failures(outputs: Iterable[EngineOutput]) -> set[tuple[int, str, str | None]]:
    # A fragment folded before its session failed is dead-lettered by offset alone.
    failed = (HookFailure, FoldedHookFailure)
    return {(o.offset, o.hook, o.session_id) for o in outputs if isinstance(o, failed)}


@settings(max_examples=800, deadline=None)
@given(st.booleans().flatmap(lambda late: scenarios(late=late)), st.data())
def test_crash_and_resume_gives_exactly_the_uninterrupted_sessions(
    scenario: OffsetScenario, data: st.DataObject
) -> None:
    offsets = [r.offset for r in scenario.records if isinstance(r, Fragment)]
    poison: dict[int, str] = {}
    if offsets and data.draw(st.integers(0, 3), label="poison?") == 0:
        hooks = st.sampled_from(["is_end", "update"])
        poison = data.draw(st.dictionaries(st.sampled_from(offsets), hooks, max_size=3))

    def make() -> Poisoned:
        return Poisoned(scenario, poison)

    engine = SessionEngine(STREAM, make())
    uninterrupted = [output for r in scenario.records for output in engine.process(r)]
    sessions = [o for o in uninterrupted if isinstance(o, FinishedSession)]
    late = [o for o in uninterrupted if isinstance(o, LateFragment)]
    run = run_engine_with_crashes(
        STREAM,
        scenario.records,
        make,
        crashes=data.draw(st.integers(1, 3), label="crashes"),
        choose=lambda lo, hi: data.draw(st.integers(lo, hi)),
    )
    expected = {session_identity(session) for session in sessions}
    durable = [session_identity(o) for o in run.committed if isinstance(o, FinishedSession)]
    assert len(durable) == len(set(durable)), "a committed session was emitted again"
    assert set(durable) == expected, "the durable output differs from the uninterrupted run"
    by_id = {session[0]: session for session in expected}
    for output in run.at_risk:
        if isinstance(output, FinishedSession):
            assert by_id[output.session_id] == session_identity(output), "a duplicate differs"
    # Late fragments and hook failures reach the dead letters at least once, even if
    # the at-risk output is lost, and a replay invents none.
    durable_late = {o.fragment.offset for o in run.committed if isinstance(o, LateFragment)}
    assert durable_late == {output.fragment.offset for output in late}
    assert _failures(run.committed) == _failures(uninterrupted)
    assert _failures(run.at_risk) <= _failures(uninterrupted)


def test_resume_keeps_a_session_that_starts_at_the_end_fragments_millisecond() -> None:
    # Session 1 = offsets 0, 3, 1 (END at ts 150); offset 2, also at ts 150 but read
    # after the END, opens session 2.  Offset 3 (ts 120) arrives late but within grace.
    records = [
        fragment_at(0, "a", 100),
        fragment_at(1, "a", 150, end=True),
        fragment_at(2, "a", 150),
        fragment_at(3, "a", 120),
        fragment_at(4, "b", 200),
    ]
    engine = SessionEngine(STREAM, OffsetRecorder(timeout_ms=100, grace_ms=50))
    first = [o for r in records for o in engine.process(r)]
    assert [s.result["offsets"] for s in first] == [(0, 3, 1)]
    state = engine.snapshot(5)
    assert state.safe_offset == 2
    resumed = SessionEngine(STREAM, OffsetRecorder(timeout_ms=100, grace_ms=50), resume=state)
    replay = [o for r in records[2:] for o in resumed.process(r)]
    replay += resumed.process(Watermark(200, end=True, offset=5))
    assert [s.result["offsets"] for s in replay] == [(2,), (4,)]
    assert resumed.counters.skipped_by_ignore_list == 1
