"""Options every command shares, each with its environment variable shown in --help."""

from __future__ import annotations

import argparse
import os

from framework.config import DEFAULT_APP, ConnectionConfig

__all__ = ["common_parser", "connection_from_args", "env_default"]


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
        "--log-level",
        default=env_default("SESSIONIZER_LOG_LEVEL", "info"),
        choices=["debug", "info", "warning", "error"],
        help="log level [env: SESSIONIZER_LOG_LEVEL] (default: info)",
    )
    return parser


def connection_from_args(args: argparse.Namespace) -> ConnectionConfig:
    """Build the validated connection config from parsed arguments."""
    return ConnectionConfig(zk=args.zk or "", bootstrap=args.bootstrap or "", app=args.app)
