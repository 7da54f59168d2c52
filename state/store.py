"""`StateStore`, the interface the node uses, and `FencedStateStore`, which implements it.

Fencing (docs/CONTRACTS.md): a stored record has a version.  Taking a stream
bumps that version (a version-checked `set` of the znode in ZooKeeper,
`VersionedMemory.take` in tests); the new version is the owner's *epoch*.
`load(stream, epoch)` fails if the version moved since, and makes `epoch` the
version the store expects.  Every `commit` is a compare-and-set on the expected
version and advances it by one; a writer whose stream was taken meanwhile gets
`FencedError` and nothing is written.

`FencedStateStore` holds that logic once, over any `VersionedRecords` (bytes
plus a version per stream): `state.zookeeper_store.ZooKeeperRecords` in the
node, `VersionedMemory` in tests (`MemoryStateStore`).
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Protocol, runtime_checkable

from state.errors import CommitUncertainError, FencedError, StateError
from state.record import DEFAULT_LIMIT_BYTES, StreamState

__all__ = [
    "FencedStateStore",
    "MemoryStateStore",
    "StateStore",
    "VersionedMemory",
    "VersionedRecords",
]


@runtime_checkable
class StateStore(Protocol):
    """Where a node loads and commits the state of the streams it owns."""

    def load(self, stream: str, epoch: int) -> StreamState:
        """Read the stream's state as its owner at `epoch`; raise `FencedError` if it moved."""
        ...

    def commit(self, stream: str, state: StreamState) -> None:
        """Write `state` if we still own the stream; else raise `FencedError`, writing nothing."""
        ...

    def release(self, stream: str) -> None:
        """Stop owning the stream here: later commits of it raise `StateError`."""
        ...


class VersionedRecords(Protocol):
    """Per-stream bytes with a version that every successful write advances by one."""

    def read(self, stream: str) -> tuple[bytes, int]:
        """Return the stream's bytes and version."""
        ...

    def write(self, stream: str, data: bytes, expected: int) -> int:
        """Replace the bytes if the version is `expected` (else `FencedError`); return it + 1."""
        ...


class FencedStateStore:
    """A `StateStore` over `VersionedRecords`: one instance per node."""

    def __init__(
        self, records: VersionedRecords, *, limit_bytes: int = DEFAULT_LIMIT_BYTES
    ) -> None:
        self.records = records
        self.limit_bytes = limit_bytes
        self._expected: dict[str, int] = {}
        self._epochs: dict[str, int] = {}
        self.sizes: dict[str, int] = {}
        """Bytes of the last record committed, per stream (for the node's metrics)."""

    def load(self, stream: str, epoch: int) -> StreamState:
        """Read the stream's state as its owner at `epoch`; raise `FencedError` if it moved."""
        data, version = self.records.read(stream)
        if version != epoch:
            raise FencedError(stream, expected=epoch, found=version)
        state = replace(StreamState.decode(data, stream=stream), epoch=epoch)
        self._expected[stream] = epoch
        self._epochs[stream] = epoch
        return state

    def commit(self, stream: str, state: StreamState) -> None:
        """Write `state` if we still own the stream; else raise `FencedError`, writing nothing."""
        expected = self._expected.get(stream)
        if expected is None:
            raise StateError(f"stream {stream}: commit without load; this node does not own it")
        if state.stream != stream or state.epoch != self._epochs[stream]:
            raise StateError(
                f"stream {stream}: state is for stream {state.stream} at epoch {state.epoch}, "
                f"but this node owns {stream} at epoch {self._epochs[stream]}"
            )
        # Encoding first: a record over the limit raises before anything is written.
        data = state.encode(limit=self.limit_bytes)
        try:
            self._expected[stream] = self.records.write(stream, data, expected)
            self.sizes[stream] = len(data)
        except (FencedError, CommitUncertainError):
            # Either way the expected version is no longer known: never write again.
            self.release(stream)
            raise

    def release(self, stream: str) -> None:
        """Stop owning the stream here: later commits of it raise `StateError`."""
        self._expected.pop(stream, None)
        self._epochs.pop(stream, None)
        self.sizes.pop(stream, None)


class VersionedMemory:
    """In-memory `VersionedRecords`, shared by the stores of several simulated nodes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[str, tuple[bytes, int]] = {}

    def read(self, stream: str) -> tuple[bytes, int]:
        """Return the stream's bytes and version (an absent record is empty, version 0)."""
        with self._lock:
            return self._records.get(stream, (b"", 0))

    def take(self, stream: str) -> int:
        """Bump the stream's version, as the balancer does on taking it; return the epoch."""
        with self._lock:
            data, version = self._records.get(stream, (b"", 0))
            self._records[stream] = (data, version + 1)
            return version + 1

    def write(self, stream: str, data: bytes, expected: int) -> int:
        """Replace the bytes if the version is `expected`; return the new version."""
        with self._lock:
            version = self._records.get(stream, (b"", 0))[1]
            if version != expected:
                raise FencedError(stream, expected=expected, found=version)
            self._records[stream] = (data, version + 1)
            return version + 1


class MemoryStateStore(FencedStateStore):
    """A `FencedStateStore` over `VersionedMemory`, for tests."""

    def __init__(
        self, memory: VersionedMemory | None = None, *, limit_bytes: int = DEFAULT_LIMIT_BYTES
    ) -> None:
        self.memory = memory if memory is not None else VersionedMemory()
        super().__init__(self.memory, limit_bytes=limit_bytes)
