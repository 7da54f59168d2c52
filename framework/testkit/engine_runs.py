"""Record by record: the session engine itself, with the offsets, commits and crashes you choose.

The node-level kit (`run`, `run_with_crashes`, `assert_exact`) is what a processor's
tests usually need. This layer drives `sessionizer.SessionEngine` directly, for tests
that need what a node never shows: offsets with gaps (Kafka's transaction markers and
compaction leave them), a commit after any record (also while a new owner re-reads),
the engine's own outputs (`LateFragment`, `HookFailure` with the id of the session it
cost) and its counters. `run_engine_with_crashes` takes its crash and commit points
from a `choose(lo, hi)` function, so a hypothesis strategy can pick them
(`lambda lo, hi: data.draw(st.integers(lo, hi))`).

`OffsetRecorder` is a processor whose result lists the offsets of its fragments
(field "o", which `fragment_at` sets), so a test sees which records formed which
session, and `session_identity` / `batch_identity` compare that with the batch
definition (`sessionizer.batch_sessions`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from framework.kernel.errors import InvalidArgument
from framework.kernel.fragment import Fragment
from sessionizer.engine import SessionEngine
from sessionizer.processor import StreamProcessor
from sessionizer.records import EngineOutput, FinishedSession, LateFragment, Record
from sessionizer.reference import BatchSession
from state.record import StreamState
from state.tracker import IGNORE_LIST_BUDGET_BYTES

__all__ = [
    "DefaultTimings",
    "EngineCrashRun",
    "Identity",
    "OffsetRecorder",
    "OffsetScenario",
    "Span",
    "batch_identity",
    "batch_span",
    "fragment_at",
    "run_engine",
    "run_engine_with_crashes",
    "session_identity",
    "session_span",
]

Span: TypeAlias = tuple[str, str, int, int, int, int, int]
"""What defines a session: id, key, first and last offset, first and last event time, count."""
Identity: TypeAlias = tuple[str, str, int, int, int, int, int, tuple[int, ...]]
"""Session id, key, first and last offset, first and last event time, count, member offsets."""

_DAY_MS = 24 * 3600 * 1000


class OffsetRecorder(StreamProcessor[dict[str, Any]]):
    """A processor whose result is `{"offsets": (...)}`: field "o" of its fragments, in call order.

    Its times are in milliseconds (`lead_ms=None`: any jump ahead is taken at
    once); a fragment with a true field "end" ends its session.
    """

    def __init__(
        self,
        timeout_ms: int,
        grace_ms: int = 0,
        max_ms: int | None = None,
        lead_ms: int | None = _DAY_MS,
    ) -> None:
        self.timeout = timeout_ms / 1000
        self.grace = grace_ms / 1000
        self.max_session_duration = None if max_ms is None else max_ms / 1000
        self.max_lead = None if lead_ms is None else lead_ms / 1000

    def is_end(self, fragment: Mapping[str, Any]) -> bool:
        """Field "end"."""
        return bool(fragment.get("end"))

    def open(self, key: str, fragment: Mapping[str, Any]) -> dict[str, Any]:
        """No offsets yet (`update` is called for the first fragment too)."""
        return {"offsets": []}

    def update(self, session: dict[str, Any], fragment: Mapping[str, Any]) -> None:
        """Record the fragment's field "o"."""
        session["offsets"].append(fragment["o"])

    def close(self, key: str, session: dict[str, Any]) -> dict[str, Any]:
        """The offsets, as a tuple."""
        return {"offsets": tuple(session["offsets"])}


class DefaultTimings(StreamProcessor[dict[str, Any]]):
    """A processor with every timing default that folds nothing: each session's result is `{}`."""

    def open(self, key: str, fragment: Mapping[str, Any]) -> dict[str, Any]:
        """An empty session."""
        return {}

    def update(self, session: dict[str, Any], fragment: Mapping[str, Any]) -> None:
        """Nothing to fold."""
        return None

    def close(self, key: str, session: dict[str, Any]) -> dict[str, Any]:
        """The session as it is."""
        return session


@dataclass(frozen=True)
class OffsetScenario:
    """A stream of records and the `OffsetRecorder` settings to sessionize it with (times in ms).

    `ends_input`: whether the records end with an end-of-input watermark.
    """

    timeout_ms: int
    grace_ms: int
    max_ms: int | None
    records: tuple[Record, ...]
    lead_ms: int = _DAY_MS
    ends_input: bool = False

    def processor(self) -> OffsetRecorder:
        """Return a fresh recording processor with these settings."""
        return OffsetRecorder(self.timeout_ms, self.grace_ms, self.max_ms, self.lead_ms)


def fragment_at(offset: int, key: str, timestamp_ms: int, *, end: bool = False) -> Fragment:
    """An engine fragment at `offset` whose fields carry its offset ("o") and END flag ("end")."""
    return Fragment(offset, key, timestamp_ms, {"o": offset, "end": end})


def session_span(session: FinishedSession) -> Span:
    """Id, key, first and last offset, first and last event time, count of a session."""
    return (session.session_id, session.key, session.first_offset, session.last_offset,
            session.first_ts, session.last_ts, session.fragments)  # fmt: skip


def batch_span(session: BatchSession, stream: str) -> Span:
    """`session_span` of the session the engine should emit for a batch session."""
    return (session.session_id(stream), session.key, session.first_offset, session.last_offset,
            session.first_ts, session.last_ts, session.fragments)  # fmt: skip


def session_identity(session: FinishedSession) -> Identity:
    """What must equal between runs: id, key, offsets, span, count, members (`OffsetRecorder`)."""
    return (*session_span(session), tuple(session.result["offsets"]))


def batch_identity(session: BatchSession, stream: str) -> Identity:
    """`session_identity` of the session the engine should emit for a batch session."""
    return (*batch_span(session, stream), session.offsets)


def run_engine(
    stream: str,
    records: Iterable[Record],
    processor: StreamProcessor[Any],
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
class EngineCrashRun:
    """The outputs of a run with crashes, split by whether a later commit made them durable."""

    committed: list[EngineOutput] = field(default_factory=list)
    """Emitted before the emitting owner's last commit, or by the final owner."""
    at_risk: list[EngineOutput] = field(default_factory=list)
    """Emitted by a crashed owner after its last commit: maybe delivered, maybe not."""
    resumed_at: list[int] = field(default_factory=list)
    """The index of the record each owner started from."""
    skipped: int = 0
    """Fragments skipped by ignore lists, over all owners."""


def run_engine_with_crashes(
    stream: str,
    records: Sequence[Record],
    make_processor: Callable[[], StreamProcessor[Any]],
    *,
    crashes: int,
    choose: Callable[[int, int], int],
    min_commit_every: int = 1,
    ignore_budget_bytes: int = IGNORE_LIST_BUDGET_BYTES,
) -> EngineCrashRun:
    """Run owners one after another; each crashes after a chosen record, the last one finishes.

    Each owner resumes a FRESH engine, with a fresh processor, from the stored bytes
    (an encode/decode round trip) at the safe offset, commits every
    `choose(min_commit_every, n + 1)` records (n + 1: never), and crashes after a
    chosen record; `choose(lo, hi)` picks an int from [lo, hi], as `random.randint`.
    """
    offsets = [_offset(record) for record in records]
    stored = b""
    run = EngineCrashRun()
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


def _offset(record: Record) -> int:
    if record.offset is None:
        raise InvalidArgument(f"{record!r} has no offset: give it one (Watermark(..., offset=...))")
    return record.offset
