"""The stream registry in ZooKeeper: `active_streams/<stream>` znodes and the recorded count.

The count lives in the data of the `active_streams` znode itself, so the list
of streams and their number change together in one transaction.  Callers pass
that znode's path (`framework.kernel.paths.AppPaths.active_streams`): the layout is
defined in one place only.  Every znode is created with the client's
`default_acl` (with --zk-auth: that identity only, `framework.kernel.zookeeper.app_acl`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoAuthError, NodeExistsError, NoNodeError

from framework.kernel.safe_json import loads_object
from framework.kernel.zookeeper import app_client
from router.errors import ProvisioningError, StreamCountMismatch, StreamsNotCreated

if TYPE_CHECKING:
    from framework.kernel.config import ConnectionConfig

__all__ = [
    "add_stream_znodes",
    "app_stream_count",
    "check_stream_count",
    "recorded_stream_count",
    "register_streams",
    "streams_for",
]


def recorded_stream_count(client: KazooClient, parent: str) -> int | None:
    """The stream count recorded under `parent`, or None if streams were never created.

    Raises `ProvisioningError` (naming the znode) when its data is not a registry's
    (`{"count": n, ...}` with `n` a positive integer), whatever the bytes.
    """
    try:
        data, _stat = client.get(parent)
    except NoNodeError:
        return None
    if not data:
        return None
    count = (loads_object(data) or {}).get("count")
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ProvisioningError(
            f"the stream registry {parent} holds no stream count ({len(data)} bytes of data "
            f'that are not {{"count": n}}); restore it, or delete the app\'s znodes and run '
            "`sessionizer streams create` again"
        )
    return count


def check_stream_count(client: KazooClient, parent: str, app: str, configured: int) -> int | None:
    """Raise `StreamCountMismatch` if a different count is recorded; return the recorded one."""
    recorded = recorded_stream_count(client, parent)
    if recorded is not None and recorded != configured:
        raise StreamCountMismatch(app, expected=recorded, configured=configured)
    return recorded


def streams_for(client: KazooClient, parent: str, app: str, configured: int | None = None) -> int:
    """The stream count a producer of `app` must route with: the one recorded under `parent`.

    Raises `StreamsNotCreated` if none is recorded, and `StreamCountMismatch` if
    `configured` (None: take the recorded count) differs from it.
    """
    recorded = recorded_stream_count(client, parent)
    if recorded is None:
        raise StreamsNotCreated(app)
    if configured is not None and configured != recorded:
        raise StreamCountMismatch(app, expected=recorded, configured=configured)
    return recorded


def app_stream_count(connection: ConnectionConfig, configured: int | None = None) -> int:
    """`streams_for` through a short-lived ZooKeeper client of `connection` (with its auth).

    What `sessionizer produce` and `generate` do before they send anything; build a
    `StreamProducer` with the count it returns.
    """
    with app_client(connection) as client:
        return streams_for(client, connection.paths.active_streams, connection.app, configured)


def register_streams(client: KazooClient, parent: str, app: str, topics: Sequence[str]) -> None:
    """Record the count and create `<parent>/<topic>` for each stream (idempotent)."""
    recorded = check_stream_count(client, parent, app, len(topics))
    try:
        client.ensure_path(parent.rsplit("/", 1)[0])
        if recorded is None:
            _create_registry(client, parent, topics)
    except NoAuthError:
        raise  # the app's znodes belong to another identity: the caller says which --zk-auth
    except KazooException as exc:
        raise ProvisioningError(
            f"registering {len(topics)} streams of app {app!r} in ZooKeeper failed: {exc}"
        ) from exc


def add_stream_znodes(client: KazooClient, parent: str, topics: Sequence[str]) -> None:
    """Create `<parent>/<topic>` for streams a live resize adds, leaving the count as it is
    (`router.resize.record_resize` changes it): the balancer may assign them at once."""
    created = int(time.time() * 1000)
    for topic in topics:
        data = json.dumps({"topic": topic, "created": created}).encode()
        try:
            client.create(f"{parent}/{topic}", data)
        except NodeExistsError:
            continue
        except KazooException as exc:
            raise ProvisioningError(f"registering {topic} under {parent} failed: {exc}") from exc


def _create_registry(client: KazooClient, parent: str, topics: Sequence[str]) -> None:
    created = int(time.time() * 1000)
    count = json.dumps({"count": len(topics), "created": created}).encode()
    transaction = client.transaction()
    if client.exists(parent) is None:
        transaction.create(parent, count)
    else:
        transaction.set_data(parent, count)
    for topic in topics:
        if client.exists(f"{parent}/{topic}") is None:
            data = json.dumps({"topic": topic, "created": created}).encode()
            transaction.create(f"{parent}/{topic}", data)
    results = transaction.commit()
    failures = [r for r in results if isinstance(r, Exception)]
    if not failures:
        return
    # The transaction is all-or-nothing; a concurrent `streams create` with the same
    # count explains a NodeExists, anything else is a real failure.
    raced = recorded_stream_count(client, parent) == len(topics)
    if not (raced and any(isinstance(f, NodeExistsError) for f in failures)):
        raise ProvisioningError(f"registering streams under {parent} failed: {failures[0]!r}")
