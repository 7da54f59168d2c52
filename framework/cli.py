"""The `sessionizer` command line (the contract of DESIGN section 11)."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

import setproctitle
from kafka.errors import KafkaError
from kazoo.exceptions import KazooException

from framework.client_settings import hide_secret_arguments
from framework.commands.options import common_parser
from framework.errors import SessionizerError
from framework.logging import configure_logging

__all__ = ["build_parser", "main"]

# Each module defines `add_parser(subparsers, common)`; the parser it adds sets `run`.
_COMMANDS = (
    "cluster",
    "streams",
    "produce",
    "status",
    "node",
    "sessions",
    "aggregate",
    "demo",
)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, with one subparser per available command."""
    parser = argparse.ArgumentParser(
        prog="sessionizer", description="Stateful stream sessionization on Kafka and ZooKeeper."
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = common_parser()
    for name in _COMMANDS:
        importlib.import_module(f"framework.commands.{name}").add_parser(subparsers, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `sessionizer` console script."""
    args = build_parser().parse_args(argv)
    _hide_secrets_from_process_title()
    configure_logging(args.log_level)
    try:
        return int(args.run(args) or 0)
    except SessionizerError as exc:
        print(f"sessionizer {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except (KafkaError, KazooException) as exc:
        # A last resort: commands wrap these where they can say more.
        print(
            f"sessionizer {args.command}: error: the cluster did not answer ({exc!r}); "
            "check --zk / --bootstrap (or SESSIONIZER_ZK / SESSIONIZER_BOOTSTRAP) and that "
            "the servers are up",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        return 130


def _hide_secrets_from_process_title() -> None:
    """`ps` shows a process's command line to every user: mask secret flag values there."""
    masked = hide_secret_arguments(sys.argv)
    if masked is not None:
        setproctitle.setproctitle(" ".join(masked))


if __name__ == "__main__":
    sys.exit(main())
