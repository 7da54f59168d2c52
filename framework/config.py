"""Connection settings shared by every command: where ZooKeeper and Kafka are, and the app."""

from __future__ import annotations

from dataclasses import dataclass

from balancer.paths import DEFAULT_NAMESPACE, AppPaths
from framework.errors import ConfigError

__all__ = ["DEFAULT_APP", "ConnectionConfig"]

DEFAULT_APP = "sessionizer"


@dataclass(frozen=True)
class ConnectionConfig:
    """Where the cluster is and which app (topic prefix and ZooKeeper subtree) to use."""

    zk: str
    bootstrap: str
    app: str = DEFAULT_APP
    namespace: str = DEFAULT_NAMESPACE

    def __post_init__(self) -> None:
        if not self.zk:
            raise ConfigError(
                "no ZooKeeper address: pass --zk or set SESSIONIZER_ZK "
                '(`eval "$(sessionizer cluster up)"` sets it for a local cluster)'
            )
        if not self.bootstrap:
            raise ConfigError(
                "no Kafka bootstrap servers: pass --bootstrap or set SESSIONIZER_BOOTSTRAP "
                '(`eval "$(sessionizer cluster up)"` sets it for a local cluster)'
            )
        # Imported here: router validates names, and config must stay import-light.
        from router.naming import validate_app

        validate_app(self.app)

    @property
    def paths(self) -> AppPaths:
        """The app's ZooKeeper layout."""
        return AppPaths(self.app, self.namespace)
