"""Per-stream state: the safe offset and ignore list, their record, and the stores."""

from __future__ import annotations

from framework.kernel.compiled import package_path

# SESSIONIZER_HOT_PATH=compiled: the mypyc build's modules of this package are found first
# (framework.kernel.compiled); before anything of the package is imported.
__path__ = package_path(__name__, __path__)

from state.errors import (
    CommitUncertainError,
    CorruptStateError,
    FencedError,
    StateError,
    StateTooLargeError,
)
from state.record import DEFAULT_LIMIT_BYTES, JUTE_MAXBUFFER, IgnoreEntry, StreamState
from state.store import (
    FencedStateStore,
    MemoryStateStore,
    StateStore,
    VersionedMemory,
    VersionedRecords,
)
from state.tracker import SafeOffsetTracker

__all__ = [
    "DEFAULT_LIMIT_BYTES",
    "JUTE_MAXBUFFER",
    "CommitUncertainError",
    "CorruptStateError",
    "FencedError",
    "FencedStateStore",
    "IgnoreEntry",
    "MemoryStateStore",
    "SafeOffsetTracker",
    "StateError",
    "StateStore",
    "StateTooLargeError",
    "StreamState",
    "VersionedMemory",
    "VersionedRecords",
]
