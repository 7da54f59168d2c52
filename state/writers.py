"""Writer records: which transactional id may hold a stream's output in an open transaction.

Exactly-once (docs/exactly-once.md, "One producer per node incarnation"): a node
writes all its streams' output through one transactional producer, so a stream's
next owner cannot fence "the stream's" producer by id. It fences the id its
writer record names instead, then names its own (`claim`, version-checked), and
only then reads the stream's committed state. A graceful release `clear`s the
record, so the next taker fences nothing. `ZooKeeperWriters` keeps the records
as persistent znodes `txn_writers/<stream>`; `MemoryWriters` in memory, for
tests and simulations.
"""

from __future__ import annotations

from typing import Protocol

from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    ZookeeperError,
)

from state.errors import StateError
from state.zookeeper_store import StreamZnodes

__all__ = ["MemoryWriters", "WriterRecords", "WriterTaken", "ZooKeeperWriters"]

NO_RECORD = -1
"""The version `read` gives a stream without a writer record (`claim` then creates it)."""


class WriterTaken(StateError):
    """Another taker named its writer since our read: this take must not go on."""

    def __init__(self, stream: str) -> None:
        super().__init__(
            f"stream {stream}: its transactional writer record changed during the take; "
            "another node is taking it, so this node gives it up and rebalances"
        )


class WriterRecords(Protocol):
    """Per stream: the transactional id that may have its output in an open transaction."""

    def read(self, stream: str) -> tuple[str | None, int]:
        """The named id (None: no record) and the record's version (`NO_RECORD`: none)."""
        ...

    def claim(self, stream: str, writer: str, version: int) -> None:
        """Name `writer` if the record is still at `version`; else raise `WriterTaken`."""
        ...

    def clear(self, stream: str, writer: str) -> None:
        """Remove the record if it still names `writer` (a graceful release)."""
        ...


class MemoryWriters:
    """`WriterRecords` in memory, shared by the simulated nodes of one test."""

    def __init__(self) -> None:
        self.records: dict[str, tuple[str, int]] = {}

    def read(self, stream: str) -> tuple[str | None, int]:
        """The named id and version."""
        writer, version = self.records.get(stream, (None, NO_RECORD))
        return writer, version

    def claim(self, stream: str, writer: str, version: int) -> None:
        """Name `writer` at `version`, or raise `WriterTaken`."""
        if self.read(stream)[1] != version:
            raise WriterTaken(stream)
        self.records[stream] = (writer, version + 1)

    def clear(self, stream: str, writer: str) -> None:
        """Forget the record if it names `writer`."""
        if self.read(stream)[0] == writer:
            del self.records[stream]


class ZooKeeperWriters(StreamZnodes):
    """`WriterRecords` as persistent znodes `<parent>/<stream>` holding the id in UTF-8."""

    def read(self, stream: str) -> tuple[str | None, int]:
        """The named id and the znode's version."""
        try:
            data, stat = self.client.get(self.path(stream))
        except NoNodeError:
            return None, NO_RECORD
        except ZookeeperError as exc:
            raise _unreachable(stream, "read", exc) from exc
        return data.decode(), int(stat.version)

    def claim(self, stream: str, writer: str, version: int) -> None:
        """Create the znode (no record yet) or set it at `version`; `WriterTaken` if it moved."""
        path, data = self.path(stream), writer.encode()
        try:
            if version == NO_RECORD:
                self.client.create(path, data, makepath=True)
            else:
                self.client.set(path, data, version=version)
        except (NodeExistsError, BadVersionError, NoNodeError) as exc:
            raise WriterTaken(stream) from exc
        except ZookeeperError as exc:
            # Landed or not (a lost connection), the take fails: the next taker reads whichever
            # id is named and fences it, ours included (we never produce for a failed take).
            raise _unreachable(stream, "claim", exc) from exc

    def clear(self, stream: str, writer: str) -> None:
        """Delete the znode if it still names `writer`."""
        try:
            data, stat = self.client.get(self.path(stream))
            if data.decode() == writer:
                self.client.delete(self.path(stream), version=stat.version)
        except (NoNodeError, BadVersionError, NotEmptyError):
            return  # gone or renamed since: nothing of ours to clear
        except ZookeeperError as exc:
            # Left as it is, the next taker fences this node's producer: a rewind, not a loss.
            raise _unreachable(stream, "clear", exc) from exc


def _unreachable(stream: str, doing: str, exc: Exception) -> StateError:
    return StateError(
        f"stream {stream}: cannot {doing} its transactional writer record in ZooKeeper "
        f"({exc!r}); the node retries the stream once the connection is back"
    )
