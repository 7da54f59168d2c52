"""Bounded state by construction: the engine force-closes the oldest open session (issue 12, bug 7).

A stream whose oldest session never ends used to grow its ignore list until the state
record exceeded the store's limit; the node then logged `state_too_large` at every
interval and never committed again.  Now the engine closes that session, marked
`truncated`, as soon as the ignore list would outgrow `IGNORE_LIST_BUDGET_BYTES`:
decided after a record, from the records alone, so a replay decides the same.
"""

from __future__ import annotations

import hashlib
import random

import msgpack

from framework.testkit.engine_runs import (
    OffsetRecorder,
    fragment_at,
    run_engine_with_crashes,
    session_identity,
)
from sessionizer import FinishedSession, Fragment, SessionEngine, Watermark
from state import DEFAULT_LIMIT_BYTES, StreamState
from state.tracker import IGNORE_LIST_BUDGET_BYTES

STREAM = "app.stream.0002"
T = 1_431_857_103_000
MINUTE = 60_000


def test_to_dict_names_truncated_only_when_true() -> None:
    plain = FinishedSession("id", "k", STREAM, 0, 1, 10, 20, 2, {"pages": 2})
    assert "truncated" not in plain.to_dict()
    cut = FinishedSession("id", "k", STREAM, 0, 1, 10, 20, 2, {"truncated": "x"}, truncated=True)
    assert cut.to_dict()["truncated"] is True  # a fixed field: it wins over the result's


def test_the_oldest_open_session_is_closed_when_the_budget_is_crossed() -> None:
    # Entries of keys "s1".."s9" cost 2 + 40 bytes: a 100-byte budget holds two.
    engine = SessionEngine(STREAM, OffsetRecorder(timeout_ms=10 * MINUTE), ignore_budget_bytes=100)
    records = [
        fragment_at(0, "long", T),
        fragment_at(1, "s1", T + 1, end=True),
        fragment_at(2, "x", T + 2),
        fragment_at(3, "s2", T + 3, end=True),
        fragment_at(4, "s3", T + 4, end=True),  # s1..s3 take 126 bytes
    ]
    outputs = [engine.process(r) for r in records]
    assert [[(s.key, s.truncated) for s in o] for o in outputs] == [
        [],
        [("s1", False)],
        [],
        [("s2", False)],
        [("s3", False), ("long", True)],
    ]
    assert outputs[-1][-1].result["offsets"] == (0,)  # through the user's hooks
    # "x" (offset 2) now holds the safe offset, and s1 left the ignore list.
    state = engine.snapshot(5)
    assert (state.safe_offset, [e.key for e in state.ignore]) == (2, ["s2", "s3"])
    assert engine.counters.truncated == 1
    # What is left closes at the end of input, untruncated.
    later = engine.process(Watermark(T + 5, end=True, offset=5))
    assert [s.key for s in later] == ["x"]
    assert not any(s.truncated for s in later)
    assert engine.counters.open_sessions == 0


def _long_session_stream(sessions: int) -> list[Fragment]:
    """One visitor stays 'online' for the whole stream while `sessions` others come and go."""
    fragments: list[Fragment] = []
    for i in range(sessions):
        ts = T + i * 1_000
        if i % 300 == 0:  # every 5 minutes: the long session goes on
            fragments.append(fragment_at(len(fragments), "long|bot", ts))
        # Realistic keys (client ip | user agent) do not compress away.
        agent = hashlib.sha256(str(i).encode()).hexdigest()[:24]
        key = f"10.{i % 256}.{i // 256 % 256}.{i // 65536}|Mozilla/5.0 {agent}"
        fragments.append(fragment_at(len(fragments), key, ts))
    fragments.append(Watermark(fragments[-1].timestamp_ms, end=True, offset=len(fragments)))
    return fragments


def _processor() -> OffsetRecorder:
    return OffsetRecorder(timeout_ms=30 * MINUTE)


def test_one_endless_session_under_many_short_ones_is_truncated_and_the_state_stays_small() -> None:
    records = _long_session_stream(30_000)
    engine = SessionEngine(STREAM, _processor())
    sessions: list[FinishedSession] = []
    largest = 0
    for index, record in enumerate(records):
        sessions += [o for o in engine.process(record) if isinstance(o, FinishedSession)]
        if index % 250 == 0:
            state = engine.snapshot(record.offset + 1)
            state.encode(limit=DEFAULT_LIMIT_BYTES)  # never raises
            ignore = msgpack.packb([e.to_list() for e in state.ignore], use_bin_type=True)
            largest = max(largest, len(ignore))
    assert largest <= IGNORE_LIST_BUDGET_BYTES < DEFAULT_LIMIT_BYTES
    truncated = [s for s in sessions if s.truncated]
    assert len(truncated) == engine.counters.truncated >= 3
    assert {s.key for s in truncated} == {"long|bot"}
    assert all(s.to_dict()["truncated"] is True for s in truncated)
    # Every fragment still lands in exactly one session, through the user's hooks.
    offsets = [o for s in sessions for o in s.result["offsets"]]
    assert sorted(offsets) == [r.offset for r in records if isinstance(r, Fragment)]
    print(
        f"\n{len(records)} records: {len(truncated)} truncated sessions, largest ignore list "
        f"{largest} bytes (budget {IGNORE_LIST_BUDGET_BYTES})"
    )


def test_truncation_replays_identically_after_crashes() -> None:
    records = _long_session_stream(20_000)
    engine = SessionEngine(STREAM, _processor())
    uninterrupted = [o for r in records for o in engine.process(r)]
    expected = {(session_identity(s), s.truncated) for s in uninterrupted}
    assert any(truncated for _, truncated in expected)
    for seed in range(3):
        chooser = random.Random(f"truncation/{seed}")
        run = run_engine_with_crashes(
            STREAM, records, _processor, crashes=3, choose=chooser.randint, min_commit_every=100
        )
        durable = [(session_identity(o), o.truncated) for o in run.committed]
        assert len(durable) == len(set(durable)), "a committed session was emitted again"
        assert set(durable) == expected
        assert {(session_identity(o), o.truncated) for o in run.at_risk} <= expected


def test_a_resumed_state_counts_its_ignore_list_against_the_budget() -> None:
    engine = SessionEngine(STREAM, OffsetRecorder(timeout_ms=10 * MINUTE), ignore_budget_bytes=100)
    for record in [fragment_at(0, "long", T), fragment_at(1, "s1", T + 1, end=True)]:
        engine.process(record)
    state = StreamState.decode(engine.snapshot(2).encode(), stream=STREAM)
    resumed = SessionEngine(
        STREAM, OffsetRecorder(timeout_ms=10 * MINUTE), resume=state, ignore_budget_bytes=100
    )
    outputs = resumed.process(fragment_at(0, "long", T))
    outputs += resumed.process(fragment_at(1, "s1", T + 1, end=True))  # skipped: in the ignore list
    assert outputs == [] and resumed.counters.skipped_by_ignore_list == 1
    [cut] = resumed.process(fragment_at(2, "s2", T + 2, end=True))  # 84 bytes: still fine
    assert cut.key == "s2"
    outputs = resumed.process(fragment_at(3, "s3", T + 3, end=True))
    assert [(s.key, s.truncated) for s in outputs] == [("s3", False), ("long", True)]
