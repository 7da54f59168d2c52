"""Sessions: the session engine, its records and `Timing`.

The `StreamProcessor` contract (`sessionizer.processor`) is public as
`framework.StreamProcessor`, the one path the README shows; `Watermark` (the
kernel's `framework.kernel.watermark`) is public here.
"""

from __future__ import annotations

from framework.kernel.compiled import package_path

# SESSIONIZER_HOT_PATH=compiled: the mypyc build's modules of this package are found first
# (framework.kernel.compiled); before anything of the package is imported.
__path__ = package_path(__name__, __path__)

from framework.kernel.fragment import Fragment
from framework.kernel.watermark import Watermark
from sessionizer.engine import SessionEngine
from sessionizer.errors import OffsetOrderError, ProcessorError, SessionError
from sessionizer.processor import Timing
from sessionizer.records import (
    EngineCounters,
    EngineOutput,
    FinishedSession,
    FutureFragment,
    HookFailure,
    LateFragment,
    Record,
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
    "Timing",
    "Watermark",
    "batch_sessions",
    "session_id",
]
