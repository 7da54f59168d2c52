"""Connection settings shared by every command: where ZooKeeper and Kafka are, and the app."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from framework.kernel.client_settings import check_client_properties, parse_zk_auth, redacted
from framework.kernel.errors import ConfigError
from framework.kernel.names import validate_app
from framework.kernel.paths import DEFAULT_NAMESPACE, AppPaths
from framework.kernel.transport import KafkaClient, resolve_transport

__all__ = ["DEFAULT_APP", "ConnectionConfig"]

DEFAULT_APP = "sessionizer"


@dataclass(frozen=True)
class ConnectionConfig:
    """Where the cluster is and which app (topic prefix and ZooKeeper subtree) to use."""

    zk: str
    bootstrap: str
    app: str = DEFAULT_APP
    namespace: str = DEFAULT_NAMESPACE
    kafka_client: KafkaClient = "auto"
    """The Kafka client library (`framework.kernel.transport`)."""
    kafka_config: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Extra Kafka client properties (standard names), e.g. security settings; may hold secrets."""
    zk_auth: str | None = field(default=None, repr=False)
    """`SCHEME:CREDENTIALS` for ZooKeeper (e.g. `digest:user:password`); None: no auth."""

    def __post_init__(self) -> None:
        if not self.zk:
            raise ConfigError("no ZooKeeper address: ConnectionConfig.zk is empty")
        if not self.bootstrap:
            raise ConfigError("no Kafka bootstrap servers: ConnectionConfig.bootstrap is empty")
        validate_app(self.app)
        resolve_transport(self.kafka_client)  # an unknown or missing client fails here, clearly
        check_client_properties(self.kafka_config, "ConnectionConfig.kafka_config")
        if self.zk_auth is not None:
            parse_zk_auth(self.zk_auth)

    def __repr__(self) -> str:
        shown = redacted(self.kafka_config)
        auth = None if self.zk_auth is None else self.zk_auth.split(":", 1)[0] + ":***"
        return (
            f"ConnectionConfig(zk={self.zk!r}, bootstrap={self.bootstrap!r}, app={self.app!r}, "
            f"kafka_client={self.kafka_client!r}, kafka_config={shown!r}, zk_auth={auth!r})"
        )

    @property
    def zk_auth_data(self) -> list[tuple[str, str]]:
        """kazoo's `auth_data` for this connection (empty without --zk-auth)."""
        return [] if self.zk_auth is None else [parse_zk_auth(self.zk_auth)]

    @property
    def paths(self) -> AppPaths:
        """The app's ZooKeeper layout."""
        return AppPaths(self.app, self.namespace)
