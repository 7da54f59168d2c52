"""Helpers for the session-engine tests: a recording processor and a crash/replay harness."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from router.formats import Format, parse_file
from sessionizer import (
    BatchSession,
    EngineOutput,
    FinishedSession,
    Fragment,
    LateFragment,
    Record,
    SessionEngine,
    StreamProcessor,
    Watermark,
)
from state import StreamState
from state.tracker import IGNORE_LIST_BUDGET_BYTES

__all__ = [
    "DAY_MS",
    "CrashRun",
    "Recorder",
    "batch_identity",
    "frag",
    "identity",
    "read_log",
    "run_uninterrupted",
    "run_with_crashes",
    "with_watermarks",
]

Identity = tuple[str, str, int, int, int, int, int, tuple[int, ...]]
DAY_MS = 24 * 3600 * 1000
"""`StreamProcessor.max_lead`'s default, in ms."""


class Recorder(StreamProcessor):
    """Collects the offsets (field "o") its fragments reach update() with, in call order."""

    def __init__(
        self,
        timeout_ms: int,
        grace_ms: int = 0,
        max_ms: int | None = None,
        lead_ms: int | None = DAY_MS,
    ) -> None:
        self.timeout = timeout_ms / 1000
        self.grace = grace_ms / 1000
        self.max_session_duration = None if max_ms is None else max_ms / 1000
        self.max_lead = None if lead_ms is None else lead_ms / 1000

    def is_end(self, fragment: Mapping[str, Any]) -> bool:
        return bool(fragment.get("end"))

    def open(self, key: str, fragment: Mapping[str, Any]) -> dict[str, Any]:
        return {"offsets": []}

    def update(self, session: dict[str, Any], fragment: Mapping[str, Any]) -> None:
        session["offsets"].append(fragment["o"])

    def close(self, key: str, session: dict[str, Any]) -> dict[str, Any]:
        return {"offsets": tuple(session["offsets"])}


def frag(offset: int, key: str, ts: int, *, end: bool = False) -> Fragment:
    """Return a fragment whose value carries its offset ("o") and END flag ("end")."""
    return Fragment(offset, key, ts, {"o": offset, "end": end})


def identity(session: FinishedSession) -> Identity:
    """Return what must be equal between runs: id, key, offsets, span, count, members."""
    return (
        session.session_id,
        session.key,
        session.first_offset,
        session.last_offset,
        session.first_ts,
        session.last_ts,
        session.fragments,
        tuple(session.result["offsets"]),
    )


def batch_identity(session: BatchSession, stream: str) -> Identity:
    """Return `identity` of the session the engine should emit for a batch session."""
    return (
        session.session_id(stream),
        session.key,
        session.first_offset,
        session.last_offset,
        session.first_ts,
        session.last_ts,
        session.fragments,
        session.offsets,
    )


def run_uninterrupted(
    stream: str,
    records: Iterable[Record],
    processor: StreamProcessor,
    *,
    ignore_budget_bytes: int = IGNORE_LIST_BUDGET_BYTES,
) -> tuple[list[FinishedSession], list[LateFragment], SessionEngine]:
    """Run one engine over all records; return its sessions, late (and future) fragments, itself."""
    engine = SessionEngine(stream, processor, ignore_budget_bytes=ignore_budget_bytes)
    sessions: list[FinishedSession] = []
    late: list[LateFragment] = []
    for record in records:
        for output in engine.process(record):
            if isinstance(output, FinishedSession):
                sessions.append(output)
            elif isinstance(output, LateFragment):
                late.append(output)
    return sessions, late, engine


@dataclass
class CrashRun:
    """Outputs of a run with crashes, split by whether a later commit made them durable."""

    committed: list[EngineOutput] = field(default_factory=list)
    """Emitted before the emitting owner's last commit, or by the final owner."""
    at_risk: list[EngineOutput] = field(default_factory=list)
    """Emitted by a crashed owner after its last commit: maybe delivered, maybe not."""
    resumed_at: list[int] = field(default_factory=list)
    """Index of the record each owner started from."""
    skipped: int = 0
    """Fragments skipped by ignore lists, over all owners."""


def run_with_crashes(
    stream: str,
    records: Sequence[Record],
    make_processor: Callable[[], StreamProcessor],
    *,
    crashes: int,
    choose: Callable[[int, int], int],
    min_commit_every: int = 1,
    ignore_budget_bytes: int = IGNORE_LIST_BUDGET_BYTES,
) -> CrashRun:
    """Run owners one after another; each crashes after a chosen record, the last one finishes.

    Each owner resumes a FRESH engine from the stored bytes (encode/decode round
    trip) at the safe offset, commits every `choose(min_commit_every, n + 1)` records
    (n + 1: never) and crashes at a chosen index; `choose(lo, hi)` picks from [lo, hi].
    """
    offsets = [record.offset for record in records]
    stored = b""
    run = CrashRun()
    for life in range(crashes + 1):
        state = StreamState.decode(stored, stream=stream)
        engine = SessionEngine(
            stream, make_processor(), resume=state, ignore_budget_bytes=ignore_budget_bytes
        )
        start = next((i for i, off in enumerate(offsets) if off >= state.safe_offset), len(records))
        run.resumed_at.append(start)
        final = life == crashes
        end = len(records) if final else choose(start, len(records))
        every = choose(min_commit_every, max(min_commit_every, end - start + 1))
        emitted: list[tuple[int, EngineOutput]] = []
        last_commit = start
        for index in range(start, end):
            emitted.extend((index, output) for output in engine.process(records[index]))
            if (index + 1 - start) % every == 0:
                stored = engine.snapshot(offsets[index] + 1).encode()
                last_commit = index + 1
        for index, output in emitted:
            (run.committed if final or index < last_commit else run.at_risk).append(output)
        run.skipped += engine.counters.skipped_by_ignore_list
    return run


def with_watermarks(fragments: Sequence[Fragment], every: int) -> list[Record]:
    """Insert a watermark (the largest event time so far) after every `every` fragments.

    Offsets are renumbered from 0, and an end-of-input watermark closes the stream,
    as the producer writes them.
    """
    records: list[Record] = []
    high = 0
    for count, fragment in enumerate(fragments, start=1):
        high = max(high, fragment.timestamp_ms)
        value = {**fragment.value, "o": len(records)}
        records.append(Fragment(len(records), fragment.key, fragment.timestamp_ms, value))
        if count % every == 0:
            records.append(Watermark(len(records), high))
    records.append(Watermark(len(records), high, end_of_input=True))
    return records


def read_log(path: Path, fmt: Format) -> list[Fragment]:
    """Parse a log file in place with the router's parser, skipping malformed lines."""
    return [
        Fragment(offset, parsed.key, parsed.timestamp_ms, parsed.fields)
        for offset, parsed in enumerate(parse_file(path, fmt))
    ]
