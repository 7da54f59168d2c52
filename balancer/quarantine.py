"""Quarantine markers: `quarantined_streams/<stream>`, one per stream whose state is corrupt.

A marker is persistent and holds compact JSON `{"reason", "node", "at"}` (`at`
in epoch seconds).  While it exists no member takes the stream; only an
operator's `sessionizer streams reset` deletes it (DESIGN section 5: nothing
resets state implicitly).  Every function here is a few requests on the
caller's thread and keeps no state.
"""

from __future__ import annotations

import time
from enum import StrEnum
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from balancer import claims
from framework.kernel.paths import AppPaths

__all__ = ["MAX_REASON_CHARS", "Outcome", "clear", "mark", "marker", "names", "read_all"]

MAX_REASON_CHARS = 2000
"""A reason longer than this is cut (znode data stays small and `status` readable)."""


class Outcome(StrEnum):
    """What `mark` did."""

    CREATED = "created"  # the marker is ours
    EXISTED = "existed"  # someone quarantined the stream already: fine
    MOVED = "moved"  # the state record changed since it was read: nothing marked


def marker(reason: str, node: str, at: float | None = None) -> dict[str, Any]:
    """The data of a marker."""
    return {
        "reason": reason[:MAX_REASON_CHARS],
        "node": node,
        "at": round(time.time() if at is None else at, 3),
    }


def mark(
    client: KazooClient, paths: AppPaths, stream: str, epoch: int, *, reason: str, node: str
) -> Outcome:
    """Create the stream's marker if its state record is still at version `epoch`.

    One transaction: a check of `stream_state/<stream>` at `epoch` (the version
    whose bytes the owner failed to decode) and the create.  A record rewritten
    since (by `streams reset`, or a newer owner) is not quarantined on the
    strength of bytes that are gone.  kazoo errors (connection loss) propagate.
    """
    tx = client.transaction()
    tx.check(paths.stream_state(stream), epoch)
    tx.create(paths.quarantined(stream), claims.encode(marker(reason, node)))
    check, create = tx.commit()
    if isinstance(create, NodeExistsError):
        return Outcome.EXISTED
    if isinstance(check, (BadVersionError, NoNodeError)):
        return Outcome.MOVED
    for result in (check, create):
        if isinstance(result, Exception):
            raise result
    return Outcome.CREATED


def names(client: KazooClient, paths: AppPaths) -> set[str]:
    """The quarantined streams (none if the parent znode does not exist yet)."""
    try:
        return set(client.get_children(paths.quarantined_streams))
    except NoNodeError:
        return set()


def read_all(client: KazooClient, paths: AppPaths) -> dict[str, dict[str, Any]]:
    """Every marker's decoded data, by stream."""
    pending = [
        (name, client.get_async(paths.quarantined(name))) for name in sorted(names(client, paths))
    ]
    markers = {}
    for name, result in pending:
        try:
            markers[name] = claims.decode(result.get()[0])
        except NoNodeError:
            continue  # reset between the listing and the read
    return markers


def clear(client: KazooClient, paths: AppPaths, stream: str) -> dict[str, Any] | None:
    """Delete the stream's marker; return what it held, or None if there was none."""
    path = paths.quarantined(stream)
    try:
        data, _ = client.get(path)
        client.delete(path)
    except NoNodeError:
        return None
    return claims.decode(data)
