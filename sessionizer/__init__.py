"""Sessions: the `StreamProcessor` contract, the session engine and its records."""

from __future__ import annotations

from sessionizer.engine import EngineCounters, SessionEngine
from sessionizer.errors import OffsetOrderError, ProcessorError, SessionError
from sessionizer.processor import StreamProcessor, Timing
from sessionizer.records import (
    EngineOutput,
    FinishedSession,
    Fragment,
    FutureFragment,
    HookFailure,
    LateFragment,
    Record,
    Watermark,
    session_id,
)
from sessionizer.reference import BatchSession, batch_sessions

__all__ = [
    "BatchSession",
    "EngineCounters",
    "EngineOutput",
    "FinishedSession",
    "Fragment",
    "FutureFragment",
    "HookFailure",
    "LateFragment",
    "OffsetOrderError",
    "ProcessorError",
    "Record",
    "SessionEngine",
    "SessionError",
    "StreamProcessor",
    "Timing",
    "Watermark",
    "batch_sessions",
    "session_id",
]
