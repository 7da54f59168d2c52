"""Fencing epochs: the version of `stream_state/<stream>` is the owner's epoch.

Taking a stream bumps that version (`claims.take`); the new version is the
lease's epoch.  Every state commit is then a compare-and-set on the version the
owner last wrote, so a node that was paused or partitioned past its session
cannot write over the new owner.  The one writer that does it is
`state.zookeeper_store.ZooKeeperRecords.write` (docs/balancing.md, "Fencing");
the balancer only hands out the epochs.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["StreamLease"]


@dataclass(frozen=True)
class StreamLease:
    """The right to own `stream` at `epoch` (the state version our take produced)."""

    stream: str
    epoch: int
