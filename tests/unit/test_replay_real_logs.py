"""The replay invariant and the state size on the real logs in tests/data (read in place).

- apache_logs: `WebSessions` (key "ip|agent", 30-minute timeout, 2-minute grace), and
  a 90-minute variant whose sessions span the log's hourly bursts, so that long
  sessions hold the safe offset back and replays skip through big ignore lists;
- auth.log: `SshConnections` (key "<host>:<pid>", END lines, 10-minute timeout).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from framework import StreamProcessor
from framework.testkit import Input, assert_batch, assert_exact, frag, watermark
from framework.testkit.engine_runs import (
    batch_identity,
    run_engine,
    run_engine_with_crashes,
    session_identity,
)
from router import Format
from router.formats import parse_file
from router.fragment import ParsedFragment
from sessionizer import (
    FinishedSession,
    Fragment,
    LateFragment,
    Record,
    SessionEngine,
    Watermark,
    batch_sessions,
)
from sessionizer.examples import SshConnections, WebSessions
from state import DEFAULT_LIMIT_BYTES, JUTE_MAXBUFFER

DATA = Path(__file__).resolve().parents[1] / "data"
STREAM = "sessionizer.stream.0000"
_cache: dict[str, list[Record]] = {}


def _records(name: str, fmt: Format) -> list[Record]:
    """Parse the log with the router's parser, adding a watermark every 500 fragments."""
    path = DATA / name
    if name not in _cache:
        _cache[name] = _with_watermarks(parse_file(path, fmt), every=500)
    return _cache[name]


def _with_watermarks(fragments: Iterable[ParsedFragment], every: int) -> list[Record]:
    """Offsets from 0, field "o" = the offset, a watermark (the largest event time so far)
    after every `every` fragments and an end-of-input watermark, as the producer writes them.
    """
    records: list[Record] = []
    high = 0
    for count, parsed in enumerate(fragments, start=1):
        high = max(high, parsed.timestamp_ms)
        value = {**parsed.fields, "o": len(records)}
        records.append(Fragment(len(records), parsed.key, parsed.timestamp_ms, value))
        if count % every == 0:
            records.append(Watermark(high, offset=len(records)))
    records.append(Watermark(high, end=True, offset=len(records)))
    return records


def _recording(base: type[StreamProcessor]) -> type[StreamProcessor]:
    """Return `base` extended to record its fragments' offsets (field "o") in the result."""

    class Recording(base):  # type: ignore[misc, valid-type]
        def open(self, key: str, fragment: Mapping[str, Any]) -> Any:
            session = super().open(key, fragment)
            session["offsets"] = []
            return session

        def update(self, session: Any, fragment: Mapping[str, Any]) -> None:
            super().update(session, fragment)
            session["offsets"].append(fragment["o"])

        def close(self, key: str, session: Any) -> dict[str, Any]:
            result = dict(super().close(key, session))
            result["offsets"] = tuple(result["offsets"])
            return result

    Recording.__name__ = f"Recording{base.__name__}"
    return Recording


class LongWebSessions(WebSessions):
    """WebSessions with a 90-minute timeout: the log's hourly pollers never time out."""

    timeout = 90 * 60


CASES: dict[str, tuple[str, Format, type[StreamProcessor]]] = {
    "apache-30min": ("apache_logs", "apache", WebSessions),
    "apache-90min": ("apache_logs", "apache", LongWebSessions),
    "sshd": ("auth.log", "sshd", SshConnections),
}


@pytest.mark.parametrize("case", CASES)
def test_sessions_equal_the_batch_definition(case: str) -> None:
    name, fmt, base = CASES[case]
    records = _records(name, fmt)
    processor = _recording(base)()
    sessions, late, engine = run_engine(STREAM, records, processor)
    assert late == []  # the logs are never more than a minute out of order
    fragments = [r for r in records if isinstance(r, Fragment)]
    timing = engine.timing
    expected = batch_sessions(
        fragments, timing.timeout_ms, processor.is_end, max_duration_ms=timing.max_duration_ms
    )
    assert sorted(session_identity(s) for s in sessions) == sorted(
        batch_identity(b, STREAM) for b in expected
    )
    assert sum(s.fragments for s in sessions) == len(fragments)


@pytest.mark.parametrize("case", ["apache-30min", "sshd"])  # 90 minutes: 30 s of re-reads
def test_the_public_kit_finds_the_logs_exact_through_a_nodes_task(case: str) -> None:
    # What a user's test of these processors does: `framework.testkit` encodes the
    # lines as a producer would and runs them through the node's own task.
    name, fmt, base = CASES[case]
    inputs: list[Input] = [
        watermark(r.timestamp_ms)
        if isinstance(r, Watermark)
        else frag(r.key, r.timestamp_ms, **r.value)
        for r in _records(name, fmt)[:-1]  # the kit appends the end of input itself
    ]
    result = assert_batch(base(), inputs)
    assert result.dead_letters == [] and len(result.sessions) > 1_000
    crashes = sorted(random.Random(case).sample(range(len(inputs)), 12))
    exact = assert_exact(base(), inputs, crash_at=crashes, uncommitted=(0, 200))
    assert exact == result


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("case", CASES)
def test_crash_and_resume_gives_the_uninterrupted_sessions(case: str, seed: int) -> None:
    name, fmt, base = CASES[case]
    records = _records(name, fmt)
    make = _recording(base)
    sessions, late, _ = run_engine(STREAM, records, make())
    chooser = random.Random(f"{case}/{seed}")
    run = run_engine_with_crashes(
        STREAM, records, make, crashes=3, choose=chooser.randint, min_commit_every=200
    )
    expected = {session_identity(s) for s in sessions}
    durable = [session_identity(o) for o in run.committed if isinstance(o, FinishedSession)]
    assert len(durable) == len(set(durable)), "a committed session was emitted again"
    assert set(durable) == expected
    by_id = {session[0]: session for session in expected}
    for output in run.at_risk:
        if isinstance(output, FinishedSession):
            assert by_id[output.session_id] == session_identity(output)
    assert not [o for o in run.committed + run.at_risk if isinstance(o, LateFragment)]
    assert late == []


def test_long_sessions_make_replays_skip_through_the_ignore_list() -> None:
    records = _records("apache_logs", "apache")
    make = _recording(LongWebSessions)
    chooser = random.Random("skips")
    run = run_engine_with_crashes(
        STREAM, records, make, crashes=2, choose=chooser.randint, min_commit_every=200
    )
    assert run.skipped > 0


@pytest.mark.parametrize(
    ("case", "every"), [("apache-30min", 1), ("sshd", 1), ("apache-90min", 50)]
)
def test_state_size_at_the_worst_commit_point(case: str, every: int) -> None:
    name, fmt, base = CASES[case]
    records = _records(name, fmt)
    engine = SessionEngine(STREAM, base())
    worst = (0, 0, 0, 0)  # size, after offset, ignore entries, safe offset
    for index, record in enumerate(records):
        engine.process(record)
        if index % every == 0 or index == len(records) - 1:
            state = engine.snapshot(record.offset + 1)
            size = len(state.encode(limit=DEFAULT_LIMIT_BYTES))
            worst = max(worst, (size, record.offset, len(state.ignore), state.safe_offset))
    size, offset, entries, safe = worst
    points = "every commit point" if every == 1 else f"every {every}th commit point"
    print(
        f"\n{case}: worst state record {size} bytes ({entries} ignore entries, "
        f"safe offset {safe}) after offset {offset}, of {len(records)} records, "
        f"checked at {points}"
    )
    assert size < DEFAULT_LIMIT_BYTES < JUTE_MAXBUFFER
