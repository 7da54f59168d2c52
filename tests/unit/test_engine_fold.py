"""Early folding (issue 16): fragments are folded as soon as no on-time fragment can sort
before them; only fragments inside the grace window stay raw; the output is unchanged."""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import framework.kernel.watermark
from framework.kernel.records import StreamRecord
from framework.node.task import StreamTask
from framework.testkit.engine_runs import (
    OffsetRecorder,
    batch_identity,
    fragment_at,
    run_engine_with_crashes,
    session_identity,
)
from router.fragment import ParsedFragment
from router.wire import encode_fragment, encode_watermark
from sessionizer import (
    FinishedSession,
    Fragment,
    HookFailure,
    LateFragment,
    Record,
    SessionEngine,
    Watermark,
    batch_sessions,
    session_id,
)
from sessionizer.records import FoldedHookFailure
from sessionizer.sinks import DeadLetter
from state import StreamState

STREAM = "app.stream.0016"


class Calls(OffsetRecorder):
    """A OffsetRecorder that logs every hook call as it happens: (hook, offset or key)."""

    def __init__(self, *args: Any, fail_on: int | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[str, Any]] = []
        self.fail_on = fail_on

    def open(self, key: str, fragment: Mapping[str, Any]) -> dict[str, Any]:
        self.calls.append(("open", fragment["o"]))
        return super().open(key, fragment)

    def update(self, session: dict[str, Any], fragment: Mapping[str, Any]) -> None:
        self.calls.append(("update", fragment["o"]))
        if fragment["o"] == self.fail_on:
            raise RuntimeError(f"update failed on {fragment['o']}")
        super().update(session, fragment)

    def close(self, key: str, session: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("close", key))
        return super().close(key, session)


def test_fragments_are_folded_once_below_the_fold_line_and_only_the_grace_stays_raw() -> None:
    processor = Calls(timeout_ms=100, grace_ms=10)
    engine = SessionEngine(STREAM, processor)
    for offset, ts in enumerate([1_000, 1_005, 1_012, 1_020, 1_021, 1_030]):
        assert engine.process(fragment_at(offset, "a", ts)) == []
    # Stream time 1030, fold line 1020: 1000, 1005, 1012 are folded (1020 is not below it).
    assert processor.calls == [("open", 0), ("update", 0), ("update", 1), ("update", 2)]
    assert engine.raw_fragments() == 3
    engine.process(Watermark(1_040, offset=6))
    assert engine.raw_fragments() == 1  # 1030 is on the line, not below it
    engine.process(Watermark(1_041, offset=7))
    assert engine.raw_fragments() == 0  # the session is open, its fragments all folded
    assert engine.counters.open_sessions == 1
    assert processor.calls[-3:] == [("update", 3), ("update", 4), ("update", 5)]
    [session] = engine.process(Watermark(1_030 + 100 + 1 + 10, offset=8))
    assert isinstance(session, FinishedSession)
    assert session.result["offsets"] == (0, 1, 2, 3, 4, 5)
    assert (session.first_ts, session.last_ts, session.fragments) == (1_000, 1_030, 6)
    assert processor.calls[-1] == ("close", "a")


def test_an_out_of_order_fragment_still_folds_in_event_time_order() -> None:
    processor = Calls(timeout_ms=100, grace_ms=10)
    engine = SessionEngine(STREAM, processor)
    records = [
        fragment_at(0, "a", 1_000),
        fragment_at(1, "a", 1_020),
        fragment_at(2, "a", 1_011),
        fragment_at(3, "a", 1_025),
    ]
    for record in records:
        engine.process(record)
    # 1011 arrived after 1020 but on time (>= 1020 - 10): it is folded before 1020.
    assert processor.calls == [("open", 0), ("update", 0), ("update", 2)]
    [session] = engine.process(Watermark(2_000, end=True, offset=4))
    assert session.result["offsets"] == (0, 2, 1, 3)


def test_a_merge_across_the_grace_window_continues_the_folded_prefix() -> None:
    # timeout 10, grace 20: a (0..2) is wholly folded, b (3, 4) is wholly raw.  The late
    # offset 5 (ts 118, on time at stream time 134) bridges them: one session.
    processor = Calls(timeout_ms=10, grace_ms=20)
    engine = SessionEngine(STREAM, processor)
    records = [fragment_at(0, "k", 100), fragment_at(1, "k", 105), fragment_at(2, "k", 110)]
    records += [fragment_at(3, "k", 125), fragment_at(4, "k", 134), fragment_at(5, "k", 118)]
    for record in records[:5]:
        engine.process(record)
    assert engine.counters.open_sessions == 2
    folded = [("open", 0), ("update", 0), ("update", 1), ("update", 2)]
    assert processor.calls == folded  # fold line 134 - 20 = 114
    engine.process(records[5])
    assert engine.counters.open_sessions == 1
    # The second session held nothing folded: its first fragment (125) is above the line
    # (114), as every fragment sorting after an on-time one is.
    [merged] = engine.process(Watermark(500, end=True, offset=6))
    assert merged.result["offsets"] == (0, 1, 2, 5, 3, 4)
    assert [o for hook, o in processor.calls if hook == "update"] == [0, 1, 2, 5, 3, 4]
    assert (merged.first_offset, merged.last_offset) == (0, 5)
    # A fresh engine without early folding would give the batch definition: so does this.
    [expected] = batch_sessions([r for r in records if isinstance(r, Fragment)], 10, _never)
    assert session_identity(merged) == batch_identity(expected, STREAM)


def test_a_merge_re_splits_the_raw_members_at_max_session_duration() -> None:
    # max 30: the bridged session would span 100..134, so it splits at 100 + 30 = 130.
    processor = Calls(timeout_ms=10, grace_ms=20, max_ms=30)
    engine = SessionEngine(STREAM, processor)
    records = [fragment_at(0, "k", 100), fragment_at(1, "k", 105), fragment_at(2, "k", 110)]
    records += [fragment_at(3, "k", 125), fragment_at(4, "k", 134), fragment_at(5, "k", 118)]
    outputs = [o for r in records for o in engine.process(r)]
    outputs += engine.process(Watermark(500, end=True, offset=6))
    got = sorted(s.result["offsets"] for s in outputs if isinstance(s, FinishedSession))
    assert got == [(0, 1, 2, 5, 3), (4,)]
    fragments = [r for r in records if isinstance(r, Fragment)]
    expected = batch_sessions(fragments, 10, _never, max_duration_ms=30)
    assert sorted(s.offsets for s in expected) == got


def test_a_late_end_splits_a_partly_folded_session() -> None:
    processor = Calls(timeout_ms=50, grace_ms=20)
    engine = SessionEngine(STREAM, processor)
    records = [
        fragment_at(0, "k", 100),
        fragment_at(1, "k", 110),
        fragment_at(2, "k", 130),
        fragment_at(3, "k", 140),
    ]
    records.append(fragment_at(4, "k", 125, end=True))  # on time: 125 >= 140 - 20
    outputs = [o for r in records for o in engine.process(r)]
    assert ("update", 0) in processor.calls  # 100 and 110 were folded before the END came
    outputs += engine.process(Watermark(500, end=True, offset=5))
    got = [s.result["offsets"] for s in outputs if isinstance(s, FinishedSession)]
    assert got == [(0, 1, 4), (2, 3)]


def test_a_hook_failing_mid_fold_dead_letters_every_fragment_of_its_session() -> None:
    processor = Calls(timeout_ms=100, grace_ms=10, fail_on=1)
    engine = SessionEngine(STREAM, processor)
    records: list[Record] = [fragment_at(o, "a", 1_000 + 10 * o) for o in range(6)]
    records.append(fragment_at(6, "b", 1_055))
    outputs = [o for r in records for o in engine.process(r)]
    assert outputs == []
    # update failed on offset 1 (folded at stream time 1020); 2, 3 and 4 were absorbed
    # since, without hooks; 5 is still raw (fold line 1055 - 10 = 1045).
    assert [c for c in processor.calls if c[0] == "update"] == [("update", 0), ("update", 1)]
    assert engine.raw_fragments() == 2  # a's 5 (1050) and b's 6 (1055)
    # End of input at the same stream time: 5 is still raw when the session ends.
    outputs = engine.process(Watermark(1_055, end=True, offset=7))
    letters = [o for o in outputs if isinstance(o, HookFailure | FoldedHookFailure)]
    assert [(f.offset, type(f).__name__) for f in letters] == [
        (0, "FoldedHookFailure"),
        (1, "HookFailure"),  # the fragment the hook failed on keeps its bytes
        (2, "FoldedHookFailure"),
        (3, "FoldedHookFailure"),
        (4, "FoldedHookFailure"),
        (5, "HookFailure"),  # raw when the session ended
    ]
    ident = session_id(STREAM, 0, "a")
    assert {(f.hook, f.error, f.session_id) for f in letters} == {
        ("update", "RuntimeError: update failed on 1", ident)
    }
    assert ("close", "a") not in processor.calls
    # The failed session kept its boundaries (all six fragments); b is its own session.
    assert engine.counters.hook_failures == 6
    assert [s.key for s in outputs if isinstance(s, FinishedSession)] == ["b"]


def test_the_node_dead_letters_folded_fragments_by_offset_with_an_empty_value() -> None:
    class Failing(Calls):
        def __init__(self) -> None:
            super().__init__(timeout_ms=10 * 60_000, grace_ms=60_000, fail_on=2)

    task = StreamTask.resume(Failing(), StreamState.initial(STREAM))
    minute = 60_000
    sources = []
    for offset in range(4):
        key, value = encode_fragment(ParsedFragment("v", offset * minute, {"o": offset}))
        sources.append(StreamRecord(STREAM, offset, key, value, offset * minute, []))
    value, headers = encode_watermark(Watermark(99 * minute, True))
    sources.append(StreamRecord(STREAM, 4, None, value, 99 * minute, headers))
    out = [o for record in sources for o in task.handle(record)]
    assert all(isinstance(o, DeadLetter) for o in out)
    assert [(o.offset, o.reason, o.key) for o in out] == [
        (o, "hook:update", b"v") for o in range(4)
    ]
    empty = [o.offset for o in out if o.value == b""]
    assert empty == [0, 1, 3]  # folded when the session failed or ended; 2 failed: bytes kept
    assert "already folded" in out[0].error and out[0].error.startswith("RuntimeError")
    assert task.dead_letters == 4


def _never(fragment: Mapping[str, Any]) -> bool:
    return bool(fragment.get("end"))


def _long_sessions(seed: int) -> list[Record]:
    """Six keys, long sessions, fragments up to 30 ms out of order, watermarks, END."""
    rng = random.Random(seed)
    records: list[Record] = []
    clock = 1_000
    for offset in range(600):
        clock += rng.randint(0, 3)
        if rng.random() < 0.1:
            records.append(Watermark(clock, offset=offset))
        else:
            ts = clock - rng.randint(0, 30)
            records.append(
                fragment_at(offset, f"k{rng.randint(0, 5)}", ts, end=rng.random() < 0.02)
            )
    records.append(Watermark(clock, end=True, offset=600))
    return records


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.data())
def test_replay_folds_the_same_fragments_and_emits_the_same_sessions(
    seed: int, data: st.DataObject
) -> None:
    records = _long_sessions(seed)

    def make() -> OffsetRecorder:
        return OffsetRecorder(timeout_ms=40, grace_ms=30, max_ms=200)

    engine = SessionEngine(STREAM, make())
    uninterrupted = []
    placed: dict[int, int] = {}  # offset -> event time, of fragments in open sessions
    for record in records:
        outputs = engine.process(record)
        uninterrupted += outputs
        if isinstance(record, Fragment):
            placed[record.offset] = record.timestamp_ms
        for output in outputs:
            if isinstance(output, FinishedSession):
                for offset in output.result["offsets"]:
                    del placed[offset]
            elif isinstance(output, LateFragment):
                del placed[output.fragment.offset]
        # Exactly the fragments inside the grace window are held raw, after every record.
        assert engine.stream_time_ms is not None
        line = engine.stream_time_ms - 30
        assert engine.raw_fragments() == sum(1 for ts in placed.values() if ts >= line)
    expected = {session_identity(s) for s in uninterrupted if isinstance(s, FinishedSession)}
    run = run_engine_with_crashes(
        STREAM, records, make, crashes=3, choose=lambda lo, hi: data.draw(st.integers(lo, hi))
    )
    durable = [session_identity(o) for o in run.committed if isinstance(o, FinishedSession)]
    assert sorted(durable) == sorted(expected)


def test_a_watermark_decoded_from_the_wire_is_an_engine_record() -> None:
    engine = SessionEngine(STREAM, OffsetRecorder(timeout_ms=10))
    engine.process(fragment_at(0, "a", 100))
    [session] = engine.process(Watermark(200, True, 1))  # as decode_record returns it
    assert session.result["offsets"] == (0,)
    assert (
        Watermark is framework.kernel.watermark.Watermark
    )  # one type, from the wire to the engine
    assert Watermark(300, offset=2).end_of_input is False
