"""Fencing epochs: the version of `stream_state/<stream>` is the owner's epoch.

Every state commit is a compare-and-set on the version the owner last wrote,
so a node that was paused or partitioned past its session cannot write over
the new owner (docs/CONTRACTS.md, "Fencing").
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, ConnectionLoss, NoNodeError, SessionExpiredError

from balancer.errors import CommitUncertain, StreamFenced

__all__ = ["StreamLease", "fenced_write"]


@dataclass(frozen=True)
class StreamLease:
    """The right to own `stream` at `epoch` (the state version our take produced)."""

    stream: str
    epoch: int


def fenced_write(
    client: KazooClient,
    path: str,
    data: bytes,
    expected_version: int,
    *,
    node: str | None = None,
) -> int:
    """Write `data` if the znode is still at `expected_version`; return the new version.

    Raises `StreamFenced` when another owner moved the version (or the record is
    gone) and `CommitUncertain` when the connection dropped mid-write.
    """
    stream = posixpath.basename(path)
    try:
        stat = client.set(path, data, version=expected_version)
    except BadVersionError as exc:
        raise StreamFenced(stream, expected=expected_version, node=node) from exc
    except NoNodeError as exc:
        raise StreamFenced(stream, expected=expected_version, node=node, gone=True) from exc
    except (ConnectionLoss, SessionExpiredError) as exc:
        raise CommitUncertain(stream, node=node) from exc
    return int(stat.version)
