"""The engine's sessions against the batch definition: the check the property tests share."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from framework.testkit.engine_runs import batch_identity, session_identity
from sessionizer.engine import SessionEngine
from sessionizer.records import FinishedSession
from sessionizer.reference import BatchSession

__all__ = ["check_sessions_of_batch"]


def check_sessions_of_batch(
    stream: str,
    sessions: Sequence[FinishedSession],
    engine: SessionEngine,
    batch: Iterable[BatchSession],
    *,
    complete: bool,
) -> None:
    """Each session is one of `batch`, once; the rest are still open; all are out if `complete`."""
    expected = {batch_identity(session, stream) for session in batch}
    got = [session_identity(session) for session in sessions]
    assert len(got) == len(set(got))
    assert set(got) <= expected
    # What is not emitted yet is still open (and nothing is, after end of input).
    assert engine.counters.open_sessions == len(expected) - len(got)
    if complete:
        assert set(got) == expected
