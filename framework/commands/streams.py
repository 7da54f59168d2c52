"""`sessionizer streams create --count N [--replication R]`."""

from __future__ import annotations

import argparse
import json

from framework.commands.options import connection_from_args
from framework.errors import ConfigError
from framework.provision import provision_streams

__all__ = ["add_parser"]


def add_parser(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Register `streams create`."""
    parser = subparsers.add_parser("streams", help="provision the app's streams")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser(
        "create",
        parents=[common],
        help="create N single-partition stream topics and register them in ZooKeeper",
    )
    create.add_argument("--count", type=int, required=True, help="number of streams")
    create.add_argument("--replication", type=int, default=1, help="replication factor")
    create.set_defaults(run=run_create)


def run_create(args: argparse.Namespace) -> int:
    """Create the streams, or check that the existing ones match --count."""
    if args.count < 1 or args.replication < 1:
        raise ConfigError("--count and --replication must be >= 1")
    connection = connection_from_args(args)
    created = provision_streams(connection, args.count, args.replication)
    print(json.dumps({"app": connection.app, "streams": args.count, "created": created}))
    return 0
