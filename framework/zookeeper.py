"""A short-lived kazoo client for commands, with a clear error when ZooKeeper is not there."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError

from framework.errors import ConfigError

__all__ = ["zookeeper_client"]


@contextmanager
def zookeeper_client(
    hosts: str, *, timeout: float = 15.0, session_timeout: float = 10.0
) -> Iterator[KazooClient]:
    """Yield a started client; always stopped and closed on exit."""
    client = KazooClient(hosts=hosts, timeout=session_timeout)
    try:
        client.start(timeout=timeout)
    except KazooTimeoutError as exc:
        client.close()
        raise ConfigError(
            f"cannot reach ZooKeeper at {hosts} within {timeout:.0f}s; "
            "is the cluster up (`sessionizer cluster up`) and --zk right?"
        ) from exc
    try:
        yield client
    finally:
        client.stop()
        client.close()
