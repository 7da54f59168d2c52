"""`ZooKeeperRecords`: versioned state records as znodes `stream_state/<stream>`.

Plugged into `FencedStateStore`, every commit is a `set` with the version the
owner last wrote, so a stale owner's write fails (BadVersion) instead of moving
the safe offset under the new owner.  A record whose ACL belongs to another
ZooKeeper identity (NoAuth: wrong or missing --zk-auth) raises
`framework.kernel.zookeeper.ZooKeeperAccessError`, a `ConfigError`: retrying cannot help.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NoAuthError,
    NoNodeError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.protocol.states import ZnodeStat

from framework.kernel.zookeeper import ZooKeeperAccessError, refused
from state.errors import CommitUncertainError, FencedError, StateError

__all__ = ["StreamZnodes", "ZooKeeperRecords", "all_written"]


class StreamZnodes:
    """One znode per stream, `<parent>/<stream>`: what the state records and the handover
    pointers (`state.handover_zookeeper`) are kept in."""

    def __init__(self, client: KazooClient, parent: str) -> None:
        self.client = client
        self.parent = parent

    def path(self, stream: str) -> str:
        """The znode of one stream."""
        return f"{self.parent}/{stream}"

    def versioned_sets(self, writes: Sequence[tuple[str, bytes, int]]) -> TransactionRequest:
        """One multi-operation (not yet committed) that sets each `(stream, data, version)`
        znode if it is still at that version: all are written, or none."""
        transaction = self.client.transaction()
        for stream, data, version in writes:
            transaction.set_data(self.path(stream), data, version=version)
        return transaction


def all_written(results: Sequence[Any]) -> bool:
    """Whether a committed `versioned_sets` wrote (no BadVersion or NoNode: nothing written)."""
    return not any(isinstance(result, Exception) for result in results)


class ZooKeeperRecords(StreamZnodes):
    """Reads and version-checked writes of `<parent>/<stream>` znodes."""

    def read(self, stream: str) -> tuple[bytes, int]:
        """Return the record's bytes and version."""
        return self._read_result(stream, lambda: self.client.get(self.path(stream)))

    def read_many(self, streams: Sequence[str]) -> dict[str, tuple[bytes, int] | Exception]:
        """Each stream's `read` in one pipelined round trip: its bytes and version, or the
        exception `read` would have raised for it (the caller raises it when it asks)."""
        pending = [(stream, self.client.get_async(self.path(stream))) for stream in streams]
        results: dict[str, tuple[bytes, int] | Exception] = {}
        for stream, result in pending:
            try:
                results[stream] = self._read_result(stream, result.get)
            except (StateError, ZooKeeperAccessError) as exc:
                results[stream] = exc
        return results

    def _read_result(
        self, stream: str, get: Callable[[], tuple[bytes, ZnodeStat]]
    ) -> tuple[bytes, int]:
        """The bytes and version `get` returns, its failures as the errors `read` raises."""
        try:
            data, stat = get()
        except NoNodeError as exc:
            raise FencedError(stream, expected=0, found=None) from exc
        except NoAuthError as exc:
            raise refused(self.client, self.path(stream)) from exc
        except (ConnectionLoss, OperationTimeoutError, SessionExpiredError) as exc:
            raise StateError(
                f"stream {stream}: cannot read its state from ZooKeeper ({exc!r}); "
                "the node retries when the connection is back"
            ) from exc
        return data, int(stat.version)

    def write_many(self, writes: Sequence[tuple[str, bytes, int]]) -> list[int] | None:
        """Write every record if each is at its expected version (one multi-operation)."""
        try:
            results = self.versioned_sets(writes).commit()
        except (ConnectionLoss, OperationTimeoutError, SessionExpiredError) as exc:
            raise CommitUncertainError(writes[0][0], f"{len(writes)} streams: {exc!r}") from exc
        if not all_written(results):
            return None  # BadVersion / NoNode somewhere: nothing was written
        return [int(stat.version) for stat in results]

    def write(self, stream: str, data: bytes, expected: int) -> int:
        """Replace the record if its version is `expected`; return the new version."""
        path = self.path(stream)
        try:
            return int(self.client.set(path, data, version=expected).version)
        except BadVersionError as exc:
            found = self.client.exists(path)
            raise FencedError(
                stream, expected=expected, found=None if found is None else found.version
            ) from exc
        except NoNodeError as exc:
            raise FencedError(stream, expected=expected, found=None) from exc
        except NoAuthError as exc:
            raise refused(self.client, path) from exc
        except (ConnectionLoss, OperationTimeoutError, SessionExpiredError) as exc:
            # Whether the write landed is unknowable here; guessing could let two owners
            # share an expected version, so the caller gives the stream up instead.
            raise CommitUncertainError(stream, repr(exc)) from exc
