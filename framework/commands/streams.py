"""`sessionizer streams create --count N [--replication R]`."""

from __future__ import annotations

import argparse
import json

from framework.commands.options import connection_from_args
from framework.zookeeper import zookeeper_client
from router.provisioning import TopicPlan, create_stream_topics
from router.registry import app_root, check_stream_count, register_streams

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
    """Create the topics, then the registry (so a node never sees streams without topics)."""
    if args.count < 1 or args.replication < 1:
        raise SystemExit("streams create: --count and --replication must be >= 1")
    connection = connection_from_args(args)
    plan = TopicPlan(connection.app, args.count, args.replication)
    with zookeeper_client(connection.zk) as client:
        root = app_root(connection.namespace, connection.app)
        # Check the recorded count before touching Kafka, so a mismatch changes nothing.
        check_stream_count(client, root, connection.app, args.count)
        created = create_stream_topics(connection.bootstrap, plan)
        register_streams(client, root, connection.app, plan.stream_topics())
    print(json.dumps({"app": connection.app, "streams": args.count, "created": len(created)}))
    return 0
