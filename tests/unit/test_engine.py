"""SessionEngine: event-time semantics, late fragments, hook failures, the processor contract."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import pytest

from framework import StreamProcessor
from framework.testing.engine_cases import FIGURE_4_3
from framework.testkit.engine_runs import (
    OffsetRecorder,
    batch_identity,
    fragment_at,
    session_identity,
)
from sessionizer import (
    FinishedSession,
    Fragment,
    HookFailure,
    LateFragment,
    OffsetOrderError,
    ProcessorError,
    SessionEngine,
    SessionError,
    Watermark,
    batch_sessions,
    session_id,
)
from sessionizer.records import FoldedHookFailure
from state import StreamState

STREAM = "app.stream.0000"


def _run(engine: SessionEngine, records: list[Any]) -> list[Any]:
    return [output for record in records for output in engine.process(record)]


def _sessions(outputs: list[Any]) -> list[FinishedSession]:
    return [o for o in outputs if isinstance(o, FinishedSession)]


def test_design_example_works_verbatim() -> None:
    class PageViews(StreamProcessor):
        timeout = 30 * 60  # inactivity gap, event-time seconds
        grace = 2 * 60  # how late a fragment may arrive

        def is_end(self, fragment):
            return fragment.get("event") == "unload"

        def open(self, key, fragment):
            return {"pages": 0}

        def update(self, session, fragment):
            session["pages"] += 1

        def close(self, key, session):
            return session

    engine = SessionEngine(STREAM, PageViews())
    records = [
        Fragment(0, "u1", 1_000, {"event": "view"}),
        Fragment(1, "u1", 61_000, {"event": "view"}),
        Fragment(2, "u1", 62_000, {"event": "unload"}),
    ]
    assert _run(engine, records) == []  # the END waits out the 2-minute grace
    [session] = engine.process(Watermark(62_000 + 120_000, offset=3))
    assert isinstance(session, FinishedSession)
    assert session.result == {"pages": 3}
    assert (session.first_offset, session.last_offset, session.fragments) == (0, 2, 3)
    assert (session.first_ts, session.last_ts) == (1_000, 62_000)


def test_session_closes_exactly_when_nothing_on_time_can_join() -> None:
    engine = SessionEngine(STREAM, OffsetRecorder(timeout_ms=10, grace_ms=5))
    assert _run(engine, [fragment_at(0, "a", 100), fragment_at(1, "b", 115)]) == []
    # Stream time 115: a fragment at 110 (= 100 + timeout) is still on time and joins.
    assert _run(engine, [fragment_at(2, "a", 110), Watermark(125, offset=3)]) == []
    [closed] = engine.process(Watermark(126, offset=4))  # 126 - 5 > 110 + 10
    assert isinstance(closed, FinishedSession)
    assert closed.result["offsets"] == (0, 2)


def test_neighbours_more_than_timeout_apart_split() -> None:
    engine = SessionEngine(STREAM, OffsetRecorder(timeout_ms=10))
    outputs = _run(
        engine, [fragment_at(0, "a", 0), fragment_at(1, "a", 10), fragment_at(2, "a", 21)]
    )
    assert [s.result["offsets"] for s in _sessions(outputs)] == [(0, 1)]


def test_out_of_order_fragment_bridging_two_open_sessions_merges_them() -> None:
    engine = SessionEngine(STREAM, OffsetRecorder(timeout_ms=10, grace_ms=20))
    assert _run(engine, [fragment_at(0, "a", 100), fragment_at(1, "a", 118)]) == []
    assert engine.counters.open_sessions == 2
    assert _run(engine, [fragment_at(2, "a", 109)]) == []
    assert engine.counters.open_sessions == 1
    [merged] = engine.process(Watermark(200, end=True, offset=3))
    assert isinstance(merged, FinishedSession)
    # Hooks see event-time order; the id comes from the smallest offset.
    assert merged.result["offsets"] == (0, 2, 1)
    assert (merged.first_offset, merged.last_offset) == (0, 2)
    assert merged.session_id == session_id(STREAM, 0, "a")


def test_out_of_order_end_fragment_splits_an_open_session() -> None:
    engine = SessionEngine(STREAM, OffsetRecorder(timeout_ms=50, grace_ms=20))
    records = [
        fragment_at(0, "a", 100),
        fragment_at(1, "a", 110),
        fragment_at(2, "a", 105, end=True),
    ]
    outputs = _run(engine, [*records, Watermark(300, end=True, offset=3)])
    assert [s.result["offsets"] for s in _sessions(outputs)] == [(0, 2), (1,)]


def test_fragment_at_the_end_fragments_millisecond_starts_a_new_session() -> None:
    engine = SessionEngine(STREAM, OffsetRecorder(timeout_ms=50))
    records = [
        fragment_at(0, "a", 100, end=True),
        fragment_at(1, "a", 100),
        Watermark(100, end=True, offset=2),
    ]
    assert [s.result["offsets"] for s in _sessions(_run(engine, records))] == [(0,), (1,)]


def test_late_fragment_is_returned_and_counted_and_changes_nothing() -> None:
    engine = SessionEngine(STREAM, OffsetRecorder(timeout_ms=100, grace_ms=5))
    outputs = _run(
        engine, [fragment_at(0, "a", 100), fragment_at(1, "b", 200), fragment_at(2, "a", 150)]
    )
    [late] = outputs
    assert isinstance(late, LateFragment)
    assert (late.fragment.offset, late.event_time_ms, late.stream_time_ms) == (2, 150, 200)
    assert "50 ms behind" in late.reason and "grace of 5 ms" in late.reason
    closed = _sessions(engine.process(Watermark(500, end=True, offset=3)))
    assert [s.result["offsets"] for s in closed] == [(0,), (1,)]
    assert engine.counters.late == 1


def test_end_of_input_closes_everything() -> None:
    engine = SessionEngine(STREAM, OffsetRecorder(timeout_ms=1_000_000))
    _run(engine, [fragment_at(0, "a", 1), fragment_at(1, "b", 2), fragment_at(2, "a", 3)])
    closed = _sessions(engine.process(Watermark(3, end=True, offset=3)))
    assert [s.key for s in closed] == ["a", "b"]
    assert engine.counters.open_sessions == 0
    assert engine.snapshot(4).safe_offset == 4


def test_max_session_duration_splits_in_event_time_like_the_batch_definition() -> None:
    processor = OffsetRecorder(timeout_ms=10, max_ms=25)
    fragments = [fragment_at(i, "a", 8 * i) for i in range(6)]  # 0, 8, ..., 40
    engine = SessionEngine(STREAM, processor)
    early = _sessions(_run(engine, fragments[:5]))  # at 32 the first 25 ms are over
    assert [s.result["offsets"] for s in early] == [(0, 1, 2, 3)]
    late = _sessions(_run(engine, [fragments[5], Watermark(40, end=True, offset=6)]))
    expected = batch_sessions(fragments, 10, processor.is_end, max_duration_ms=25)
    assert [session_identity(s) for s in early + late] == [
        batch_identity(b, STREAM) for b in expected
    ]


def test_update_may_return_a_replacement_session() -> None:
    class Count(StreamProcessor):
        timeout = 1

        def open(self, key: str, fragment: Mapping[str, Any]) -> int:
            return 0

        def update(self, session: int, fragment: Mapping[str, Any]) -> int:
            return session + 1

        def close(self, key: str, session: int) -> dict[str, Any]:
            return {"n": session}

    engine = SessionEngine(STREAM, Count())
    records = [Fragment(i, "k", i, {}) for i in range(3)] + [Watermark(3, end=True, offset=3)]
    [session] = _run(engine, records)
    assert session.result == {"n": 3}


class _Fails(OffsetRecorder):
    """Raises in the hook named `hook` on the fragment with offset `bad`."""

    def __init__(self, hook: str, bad: int) -> None:
        super().__init__(timeout_ms=10)
        self.hook, self.bad = hook, bad

    def _check(self, hook: str, fragment: Mapping[str, Any]) -> None:
        if hook == self.hook and fragment["o"] == self.bad:
            raise ValueError(f"bad fragment {self.bad}")

    def timestamp(self, fragment: Mapping[str, Any], record_timestamp_ms: int) -> int:
        self._check("timestamp", fragment)
        return record_timestamp_ms

    def is_end(self, fragment: Mapping[str, Any]) -> bool:
        self._check("is_end", fragment)
        return False

    def open(self, key: str, fragment: Mapping[str, Any]) -> dict[str, Any]:
        self._check("open", fragment)
        return super().open(key, fragment)

    def update(self, session: dict[str, Any], fragment: Mapping[str, Any]) -> None:
        self._check("update", fragment)
        super().update(session, fragment)


_FAILING_STREAM = [
    fragment_at(0, "a", 0),
    fragment_at(1, "b", 1),
    fragment_at(2, "a", 2),
    Watermark(100, end=True, offset=3),
]


@pytest.mark.parametrize(("hook", "stream_time"), [("timestamp", 1), ("is_end", 2)])
def test_arrival_hook_failure_dead_letters_one_fragment(hook: str, stream_time: int) -> None:
    engine = SessionEngine(STREAM, _Fails(hook, bad=2))
    _run(engine, _FAILING_STREAM[:3])
    # A known event time moves stream time, as the fragment would if skipped on resume.
    assert engine.stream_time_ms == stream_time
    engine = SessionEngine(STREAM, _Fails(hook, bad=2))
    outputs = _run(engine, _FAILING_STREAM)
    [failure] = [o for o in outputs if isinstance(o, HookFailure)]
    assert (failure.fragment.offset, failure.hook, failure.session_id) == (2, hook, None)
    assert failure.error == "ValueError: bad fragment 2"
    assert [s.result["offsets"] for s in _sessions(outputs)] == [(0,), (1,)]
    assert engine.counters.hook_failures == 1


@pytest.mark.parametrize(
    ("hook", "bad", "kinds"),
    [
        ("open", 0, ["HookFailure", "FoldedHookFailure"]),
        ("update", 2, ["FoldedHookFailure", "HookFailure"]),
    ],
)
def test_fold_hook_failure_dead_letters_the_whole_session(
    hook: str, bad: int, kinds: list[str]
) -> None:
    engine = SessionEngine(STREAM, _Fails(hook, bad=bad))
    outputs = _run(engine, _FAILING_STREAM)
    failures = [o for o in outputs if isinstance(o, HookFailure | FoldedHookFailure)]
    assert [(f.offset, f.key, f.hook) for f in failures] == [(0, "a", hook), (2, "a", hook)]
    # The fragment the hook failed on keeps its bytes; the other one was folded (grace 0)
    # before the session ended, and only its offset is left.
    assert [type(f).__name__ for f in failures] == kinds
    assert next(f for f in failures if isinstance(f, HookFailure)).fragment.offset == bad
    assert {f.session_id for f in failures} == {session_id(STREAM, 0, "a")}
    assert [s.key for s in _sessions(outputs)] == ["b"]  # the stream goes on
    assert (engine.counters.hook_failures, engine.counters.sessions) == (2, 1)


def test_close_must_return_a_dict() -> None:
    class BadClose(OffsetRecorder):
        def close(self, key: str, session: dict[str, Any]) -> Any:
            return ["not", "a", "dict"]

    [failure] = _run(
        SessionEngine(STREAM, BadClose(10)),
        [fragment_at(0, "a", 0), Watermark(0, end=True, offset=1)],
    )
    assert isinstance(failure, HookFailure)
    assert failure.hook == "close" and "must return a dict, got list" in failure.error


def test_to_dict_flattens_the_result_and_fixed_fields_win() -> None:
    session = FinishedSession("id-1", "k", STREAM, 3, 9, 10, 20, 4, {"pages": 2, "key": "x"})
    assert session.to_dict() == {
        "pages": 2,
        "session_id": "id-1",
        "key": "k",
        "stream": STREAM,
        "first_offset": 3,
        "last_offset": 9,
        "first_ts": 10,
        "last_ts": 20,
        "fragments": 4,
    }


def test_session_id_is_stream_first_offset_and_key_hash() -> None:
    digest = hashlib.blake2b(b"1.2.3.4|curl", digest_size=4).hexdigest()
    assert session_id(STREAM, 42, "1.2.3.4|curl") == f"{STREAM}:42:{digest}"


def test_figure_4_3_through_the_engine_and_resume() -> None:
    ends = {offset for offset, _, mark in FIGURE_4_3 if mark == "*"}
    records = [fragment_at(o, key, timestamp_ms=o, end=o in ends) for o, key, _ in FIGURE_4_3]
    engine = SessionEngine(STREAM, OffsetRecorder(timeout_ms=1_000))
    states = {}
    for record in records:
        engine.process(record)
        states[record.offset] = engine.snapshot(record.offset + 1)
    seen = {o: (s.safe_offset, {e.key for e in s.ignore}) for o, s in states.items()}
    assert (seen[3], seen[7], seen[8]) == ((1, {"s1"}), (1, {"s1", "s3"}), (6, {"s3", "s2"}))
    # A new owner resuming after fragment 7 skips s1 and s3 and finishes only s2.
    resumed = SessionEngine(STREAM, OffsetRecorder(timeout_ms=1_000), resume=states[7])
    outputs = _run(resumed, records[1:])
    assert [s.result["offsets"] for s in _sessions(outputs)] == [(1, 5, 8)]
    assert resumed.counters.skipped_by_ignore_list == 4  # fragments 2, 3, 4 and 7


def test_offsets_must_increase_and_start_at_the_resume_point() -> None:
    engine = SessionEngine(STREAM, OffsetRecorder(10))
    engine.process(fragment_at(5, "a", 0))
    with pytest.raises(OffsetOrderError, match="offset 5"):
        engine.process(fragment_at(5, "a", 0))
    with pytest.raises(OffsetOrderError, match="snapshot at offset 3"):
        engine.snapshot(3)
    resumed = SessionEngine(
        STREAM, OffsetRecorder(10), resume=StreamState(STREAM, safe_offset=10, committed_offset=12)
    )
    with pytest.raises(OffsetOrderError, match="from 10 on"):
        resumed.process(fragment_at(9, "a", 0))


def test_resuming_from_another_streams_state_is_refused() -> None:
    with pytest.raises(SessionError, match="state of other"):
        SessionEngine(STREAM, OffsetRecorder(10), resume=StreamState.initial("other"))


@pytest.mark.parametrize(
    ("attribute", "value"),
    [
        ("timeout", -1),
        ("timeout", 0),
        ("timeout", True),
        ("timeout", float("nan")),
        ("grace", -0.5),
        ("grace", "2m"),
        ("max_session_duration", 0),
    ],
)
def test_bad_time_attributes_fail_at_class_definition(attribute: str, value: object) -> None:
    with pytest.raises(ProcessorError, match=rf"Bad\.{attribute} must be"):
        type("Bad", (OffsetRecorder,), {attribute: value})


def test_bad_instance_attribute_fails_when_the_engine_is_built() -> None:
    processor = OffsetRecorder(10)
    processor.timeout = -3
    with pytest.raises(ProcessorError, match=r"OffsetRecorder\.timeout must be a positive number"):
        SessionEngine(STREAM, processor)


def test_zero_grace_and_no_maximum_are_valid() -> None:
    engine = SessionEngine(STREAM, OffsetRecorder(10, grace_ms=0, max_ms=None))
    assert (engine.timing.grace_ms, engine.timing.max_duration_ms) == (0, None)


def test_only_the_three_fold_hooks_are_abstract() -> None:
    with pytest.raises(TypeError, match="abstract"):
        StreamProcessor()  # type: ignore[abstract]
    assert StreamProcessor.__abstractmethods__ == frozenset({"open", "update", "close"})
