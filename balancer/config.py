"""The balancer's settings (frozen, validated) and the owner's callback contract."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from balancer.fencing import StreamLease
from balancer.paths import DEFAULT_NAMESPACE, AppPaths
from framework.client_settings import parse_zk_auth
from framework.errors import ConfigError

__all__ = ["BalancerConfig", "BalancerListener", "NoopListener"]


@dataclass(frozen=True)
class BalancerConfig:
    """One member's settings; times in seconds."""

    zk_hosts: str
    app: str
    consumer_id: str
    namespace: str = DEFAULT_NAMESPACE
    session_timeout: float = 10.0
    # Watch events arriving within this window are handled by one balance pass.
    debounce: float = 0.2
    # A pass runs at least this often even without events (a watch can be missed).
    resync_interval: float = 30.0
    # Back-off after a pass failed on a ZooKeeper error.
    retry_delay: float = 0.5
    # How long another live session may hold our membership znode before we give up.
    duplicate_timeout: float = 30.0
    # Informational (stored in the membership znode): reserved for load-based balancing.
    capacity: int | None = None
    # `SCHEME:CREDENTIALS` (e.g. `digest:user:password`) for the client the balancer builds
    # when given none; its znodes are then created with that identity's ACL only.
    zk_auth: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.zk_hosts:
            raise ConfigError("no ZooKeeper address: zk_hosts is empty")
        self.paths.consumer(self.consumer_id)  # validates namespace, app and id
        if self.session_timeout <= 0:
            raise ConfigError(f"session_timeout must be > 0, got {self.session_timeout}")
        for name in ("debounce", "resync_interval", "retry_delay", "duplicate_timeout"):
            if getattr(self, name) < 0:
                raise ConfigError(f"balancer {name} must be >= 0, got {getattr(self, name)}")
        if self.capacity is not None and self.capacity < 1:
            raise ConfigError(f"balancer capacity must be >= 1, got {self.capacity}")
        if self.zk_auth is not None:
            parse_zk_auth(self.zk_auth)

    @property
    def paths(self) -> AppPaths:
        """The app's ZooKeeper layout."""
        return AppPaths(self.app, self.namespace)


class BalancerListener(Protocol):
    """What the owner is told; every call happens on the owner's thread, inside `poll`.

    Order for one stream: `on_assigned` -> (`on_paused` -> `on_resumed`)* ->
    `on_revoked` (commit now; the claim is deleted after it returns) or `on_lost`
    (the stream is already gone: do not commit).
    """

    def on_assigned(self, leases: Sequence[StreamLease]) -> None:
        """Streams newly taken, each with its fencing epoch."""

    def on_revoked(self, streams: Sequence[str]) -> None:
        """Streams about to be released: commit their state before returning."""

    def on_lost(self, streams: Sequence[str]) -> None:
        """Streams taken away (session lost or fenced): drop them without committing."""

    def on_paused(self) -> None:
        """The connection is suspended: stop handing out records and stop committing."""

    def on_resumed(self) -> None:
        """The connection is back and the claims we still hold are verified."""


class NoopListener:
    """A listener that ignores everything; subclass it to override only some calls."""

    def on_assigned(self, leases: Sequence[StreamLease]) -> None:
        """Ignore."""

    def on_revoked(self, streams: Sequence[str]) -> None:
        """Ignore."""

    def on_lost(self, streams: Sequence[str]) -> None:
        """Ignore."""

    def on_paused(self) -> None:
        """Ignore."""

    def on_resumed(self) -> None:
        """Ignore."""
