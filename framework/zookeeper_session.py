"""The session timeout ZooKeeper grants: servers clamp a client's request to their bounds.

ZooKeeper grants a session timeout between its `minSessionTimeout` and
`maxSessionTimeout` (2 and 20 ticks by default: 4 to 40 s with `tickTime=2000`)
whatever the client asks; a node that believed it had asked-for 100 s would
size its deadlines wrongly. kazoo does not keep the granted value, but logs it
when the session is created; `granted_session_timeout` reads it there.
"""

from __future__ import annotations

import logging
from typing import Any

from kazoo.handlers.threading import KazooTimeoutError

from framework.kernel.config import ConnectionConfig
from framework.kernel.errors import ConfigError
from framework.kernel.zookeeper import new_client

__all__ = ["check_session_timeout", "granted_session_timeout"]


class _GrantProbe:
    """Stands in for kazoo's logger: forwards every call, keeps the negotiated timeout."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self.granted_ms: int | None = None

    def log(self, level: int, msg: str, *args: Any, **kwargs: Any) -> None:
        """Forward; on kazoo's "Session created" record, keep its third value (milliseconds)."""
        if isinstance(msg, str) and msg.startswith("Session created") and len(args) >= 3:
            granted = args[2]
            self.granted_ms = granted if isinstance(granted, int) else None
        self._logger.log(level, msg, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._logger, name)


def granted_session_timeout(
    connection: ConnectionConfig, requested: float, *, timeout: float = 15.0
) -> float | None:
    """Seconds ZooKeeper grants a session that asks for `requested` (None: not known)."""
    probe = _GrantProbe(logging.getLogger("kazoo.client"))
    client = new_client(
        connection.zk, auth=connection.zk_auth, session_timeout=requested, logger=probe
    )
    try:
        client.start(timeout=timeout)
    except KazooTimeoutError as exc:
        raise ConfigError(
            f"cannot reach ZooKeeper at {connection.zk} within {timeout:.0f}s; "
            "is the cluster up (`sessionizer cluster up`) and --zk right?"
        ) from exc
    finally:
        client.stop()
        client.close()
    return None if probe.granted_ms is None else probe.granted_ms / 1000


def check_session_timeout(connection: ConnectionConfig, requested: float) -> None:
    """Raise `ConfigError` if ZooKeeper would not grant `requested` seconds."""
    granted = granted_session_timeout(connection, requested)
    if granted is None or abs(granted - requested) < 0.001:
        return
    bound = "maxSessionTimeout" if granted < requested else "minSessionTimeout"
    raise ConfigError(
        f"--session-timeout {requested:g} s: ZooKeeper at {connection.zk} grants "
        f"{granted:g} s (its {bound}); pass --session-timeout {granted:g}, or change "
        f"{bound} on the servers"
    )
