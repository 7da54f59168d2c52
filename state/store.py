"""`StateStore`, the interface the node uses, and `FencedStateStore`, which implements it.

What the node's checkpoint (`framework.node.checkpoint`) needs of a store is on the
Protocol: prepare an assignment's loads, load, commit (one or many), release, the
`version` a handover names, and the `sizes` its metrics show.

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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Final, Protocol, runtime_checkable

from state.errors import CommitUncertainError, FencedError, StateError
from state.record import DEFAULT_LIMIT_BYTES, StreamState

__all__ = [
    "BATCH_BYTES",
    "BATCH_WRITES",
    "BatchedRecords",
    "FencedStateStore",
    "MemoryStateStore",
    "StateStore",
    "VersionedMemory",
    "VersionedRecords",
]


BATCH_BYTES: Final = 512 * 1024
"""Most record bytes in one multi-operation (ZooKeeper's request limit is 1 MiB)."""
BATCH_WRITES: Final = 256
"""Most records in one multi-operation."""


@runtime_checkable
class StateStore(Protocol):
    """Where a node loads and commits the state of the streams it owns."""

    def prepare(self, streams: Sequence[str]) -> None:
        """Before the loads of an assignment: do for all its streams at once what can be
        done at once (read their records; exactly-once: fence their earlier writers)."""
        ...

    def load(self, stream: str, epoch: int) -> StreamState:
        """Read the stream's state as its owner at `epoch`; raise `FencedError` if it moved."""
        ...

    def commit(self, stream: str, state: StreamState) -> None:
        """Write `state` if we still own the stream; else raise `FencedError`, writing nothing."""
        ...

    def commit_many(self, states: Sequence[StreamState]) -> dict[str, StateError | None]:
        """Commit several streams' states; the outcome of each (None: written)."""
        ...

    def release(self, stream: str) -> None:
        """Stop owning the stream here: later commits of it raise `StateError`."""
        ...

    def version(self, stream: str) -> int | None:
        """The version of the stream's record as last written or loaded here; None if not
        owned here.  A handover is for the next owner's epoch: this plus one."""
        ...

    @property
    def sizes(self) -> Mapping[str, int]:
        """Bytes of the last record committed, per owned stream (for the node's metrics)."""
        ...


class VersionedRecords(Protocol):
    """Per-stream bytes with a version that every successful write advances by one."""

    def read(self, stream: str) -> tuple[bytes, int]:
        """Return the stream's bytes and version."""
        ...

    def read_many(self, streams: Sequence[str]) -> dict[str, tuple[bytes, int] | Exception]:
        """Each stream's `read` at once: its bytes and version, or what `read` would raise."""
        ...

    def write(self, stream: str, data: bytes, expected: int) -> int:
        """Replace the bytes if the version is `expected` (else `FencedError`); return it + 1."""
        ...


@runtime_checkable
class BatchedRecords(VersionedRecords, Protocol):
    """`VersionedRecords` that can write several records in one all-or-nothing request."""

    def write_many(self, writes: Sequence[tuple[str, bytes, int]]) -> list[int] | None:
        """Write all (stream, data, expected version) or none; new versions, or None if any
        version moved. Raise `CommitUncertainError` if the outcome is unknown."""
        ...


def _batches(encoded: list[tuple[str, bytes]]) -> list[list[tuple[str, bytes]]]:
    """Split writes so one request stays well below ZooKeeper's 1 MiB `jute.maxbuffer`."""
    batches: list[list[tuple[str, bytes]]] = [[]]
    size = 0
    for stream, data in encoded:
        if batches[-1] and (size + len(data) > BATCH_BYTES or len(batches[-1]) >= BATCH_WRITES):
            batches.append([])
            size = 0
        batches[-1].append((stream, data))
        size += len(data)
    return [batch for batch in batches if batch]


def _outcome(write: Callable[[str, Any], None], stream: str, payload: Any) -> StateError | None:
    """Run one write; its `StateError`, or None if it went through."""
    try:
        write(stream, payload)
    except StateError as exc:
        return exc
    return None


class FencedStateStore:
    """A `StateStore` over `VersionedRecords`: one instance per node."""

    def __init__(
        self, records: VersionedRecords, *, limit_bytes: int = DEFAULT_LIMIT_BYTES
    ) -> None:
        self.records = records
        self.limit_bytes = limit_bytes
        self._expected: dict[str, int] = {}
        self._epochs: dict[str, int] = {}
        self._read_ahead: dict[str, tuple[bytes, int] | Exception] = {}
        """What `prepare` read for the loads that follow it; each load takes its own."""
        self.sizes: dict[str, int] = {}
        """Bytes of the last record committed, per stream (for the node's metrics)."""

    def prepare(self, streams: Sequence[str]) -> None:
        """Before an assignment's loads: read all its streams' records at once (`read_many`),
        not one round trip per stream (the loads that follow take what was read)."""
        self._read_ahead = self.records.read_many(streams)

    def load(self, stream: str, epoch: int) -> StreamState:
        """Read the stream's state as its owner at `epoch`; raise `FencedError` if it moved."""
        return self.load_stored(stream, epoch)[0]

    def load_stored(self, stream: str, epoch: int) -> tuple[StreamState, int]:
        """`load`, and the owner epoch the record was written at (before `epoch` replaced it)."""
        ahead = self._read_ahead.pop(stream, None)
        if isinstance(ahead, Exception):
            raise ahead
        # Read ahead (after the stream was taken) or now: either read precedes every
        # commit of this owner, which the version fences.
        data, version = self.records.read(stream) if ahead is None else ahead
        if version != epoch:
            raise FencedError(stream, expected=epoch, found=version)
        stored = StreamState.decode(data, stream=stream)
        self._expected[stream] = epoch
        self._epochs[stream] = epoch
        return replace(stored, epoch=epoch), stored.epoch

    def commit(self, stream: str, state: StreamState) -> None:
        """Write `state` if we still own the stream; else raise `FencedError`, writing nothing."""
        self._write(stream, self._encoded(stream, state))

    def commit_many(self, states: Sequence[StreamState]) -> dict[str, StateError | None]:
        """Commit several streams, in as few round trips as the records allow; outcome per stream.

        Over `BatchedRecords`, the writes go as all-or-nothing batches (one ZooKeeper
        multi-operation each); a batch in which any version moved is retried stream by
        stream, so each stream gets its own precise outcome.
        """
        outcomes: dict[str, StateError | None] = {}
        if not isinstance(self.records, BatchedRecords) or len(states) < 2:
            for state in states:
                outcomes[state.stream] = _outcome(self.commit, state.stream, state)
            return outcomes
        encoded: list[tuple[str, bytes]] = []
        for state in states:
            try:
                encoded.append((state.stream, self._encoded(state.stream, state)))
            except StateError as exc:
                outcomes[state.stream] = exc
        for batch in _batches(encoded):
            if not self._write_batch(batch, outcomes):
                for stream, data in batch:
                    outcomes[stream] = _outcome(self._write, stream, data)
        return outcomes

    def _encoded(self, stream: str, state: StreamState) -> bytes:
        if self._expected.get(stream) is None:
            raise StateError(f"stream {stream}: commit without load; this node does not own it")
        if state.stream != stream or state.epoch != self._epochs[stream]:
            raise StateError(
                f"stream {stream}: state is for stream {state.stream} at epoch {state.epoch}, "
                f"but this node owns {stream} at epoch {self._epochs[stream]}"
            )
        # Encoding first: a record over the limit raises before anything is written.
        return state.encode(limit=self.limit_bytes)

    def _write(self, stream: str, data: bytes) -> None:
        try:
            self._expected[stream] = self.records.write(stream, data, self._expected[stream])
            self.sizes[stream] = len(data)
        except (FencedError, CommitUncertainError):
            # Either way the expected version is no longer known: never write again.
            self.release(stream)
            raise

    def _write_batch(
        self, batch: list[tuple[str, bytes]], outcomes: dict[str, StateError | None]
    ) -> bool:
        """One all-or-nothing write; False if a version moved (nothing was written)."""
        assert isinstance(self.records, BatchedRecords)
        writes = [(stream, data, self._expected[stream]) for stream, data in batch]
        try:
            versions = self.records.write_many(writes)
        except CommitUncertainError as exc:
            for stream, _ in batch:
                self.release(stream)
                outcomes[stream] = CommitUncertainError(stream, str(exc))
            return True
        if versions is None:
            return False
        for (stream, data), version in zip(batch, versions, strict=True):
            self._expected[stream] = version
            self.sizes[stream] = len(data)
            outcomes[stream] = None
        return True

    def version(self, stream: str) -> int | None:
        """The version of the stream's record as this node last wrote (or loaded) it; None if
        it does not own the stream.  Its next owner's epoch is this plus one (a handover)."""
        return self._expected.get(stream)

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

    def read_many(self, streams: Sequence[str]) -> dict[str, tuple[bytes, int] | Exception]:
        """Each stream's `read`."""
        return {stream: self.read(stream) for stream in streams}

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
