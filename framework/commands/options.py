"""Options every command shares, each with its environment variable shown in --help."""

from __future__ import annotations

import argparse
import os

from framework.client_settings import read_kafka_properties
from framework.config import DEFAULT_APP, ConnectionConfig
from framework.errors import ConfigError
from framework.transport import KAFKA_CLIENTS

__all__ = ["common_parser", "connection_from_args", "env_default", "require_addresses"]

_LOCAL = '(`eval "$(sessionizer cluster up)"` sets it for a local cluster)'


def require_addresses(args: argparse.Namespace, *, zk: bool = True, bootstrap: bool) -> None:
    """Say which flag or variable is missing, the way a command-line user fixes it."""
    if zk and not args.zk:
        raise ConfigError(f"no ZooKeeper address: pass --zk or set SESSIONIZER_ZK {_LOCAL}")
    if bootstrap and not getattr(args, "bootstrap", None):
        raise ConfigError(
            f"no Kafka bootstrap servers: pass --bootstrap or set SESSIONIZER_BOOTSTRAP {_LOCAL}"
        )


def env_default(variable: str, fallback: str | None = None) -> str | None:
    """The value of `variable` at parse time (never at import time), else `fallback`."""
    return os.environ.get(variable) or fallback


def common_parser() -> argparse.ArgumentParser:
    """A parent parser with --zk, --bootstrap, --app and --log-level."""
    parser = argparse.ArgumentParser(add_help=False)
    group = parser.add_argument_group("cluster")
    group.add_argument(
        "--zk",
        default=env_default("SESSIONIZER_ZK"),
        help="ZooKeeper connection string [env: SESSIONIZER_ZK]",
    )
    group.add_argument(
        "--bootstrap",
        default=env_default("SESSIONIZER_BOOTSTRAP"),
        help="Kafka bootstrap servers [env: SESSIONIZER_BOOTSTRAP]",
    )
    group.add_argument(
        "--app",
        default=env_default("SESSIONIZER_APP", DEFAULT_APP),
        help=f"app name: topic prefix and ZooKeeper subtree [env: SESSIONIZER_APP] "
        f"(default: {DEFAULT_APP})",
    )
    group.add_argument(
        "--kafka-client",
        choices=KAFKA_CLIENTS,
        default=env_default("SESSIONIZER_KAFKA_CLIENT", "auto"),
        help="Kafka client library: confluent-kafka (librdkafka) or kafka-python; auto takes "
        "confluent-kafka when it is installed [env: SESSIONIZER_KAFKA_CLIENT] (default: auto)",
    )
    group.add_argument(
        "--kafka-config",
        metavar="FILE",
        default=env_default("SESSIONIZER_KAFKA_CONFIG"),
        help="Kafka client properties file (security.protocol, sasl.*, ssl.*, ...) "
        "[env: SESSIONIZER_KAFKA_CONFIG]",
    )
    group.add_argument(
        "--zk-auth",
        metavar="SCHEME:CREDENTIALS",
        default=env_default("SESSIONIZER_ZK_AUTH"),
        help="ZooKeeper authentication, e.g. digest:user:password [env: SESSIONIZER_ZK_AUTH]",
    )
    group.add_argument(
        "--log-level",
        default=env_default("SESSIONIZER_LOG_LEVEL", "info"),
        choices=["debug", "info", "warning", "error"],
        help="log level [env: SESSIONIZER_LOG_LEVEL] (default: info)",
    )
    return parser


def connection_from_args(args: argparse.Namespace) -> ConnectionConfig:
    """Build the validated connection config from parsed arguments."""
    require_addresses(args, bootstrap=True)
    kafka_config = getattr(args, "kafka_config", None)
    return ConnectionConfig(
        zk=args.zk or "",
        bootstrap=args.bootstrap or "",
        app=args.app,
        kafka_client=getattr(args, "kafka_client", None) or "auto",
        kafka_config=read_kafka_properties(kafka_config) if kafka_config else {},
        zk_auth=getattr(args, "zk_auth", None) or None,
    )
