"""`sessionizer cluster up|down`: a real local ZooKeeper + Kafka for development."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from framework.cluster import LocalCluster, running_cluster, stop_cluster_dir
from framework.commands.options import env_default

__all__ = ["add_parser"]


def add_parser(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Register `cluster up` and `cluster down`."""
    parser = subparsers.add_parser("cluster", help="start or stop a local ZooKeeper + Kafka")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    up = actions.add_parser(
        "up",
        parents=[common],
        help="start real ZooKeeper and Kafka JVMs; prints export lines for eval",
        description='Starts the servers and returns when they serve. Use as: eval "$(sessionizer '
        'cluster up)". Progress goes to stderr, the export lines to stdout.',
    )
    _dir_option(up)
    up.add_argument("--zookeepers", type=int, choices=[1, 3], default=1)
    up.add_argument("--brokers", type=int, choices=[1, 3], default=1)
    up.set_defaults(run=run_up)
    down = actions.add_parser("down", parents=[common], help="stop the local cluster")
    _dir_option(down)
    down.set_defaults(run=run_down)


def _dir_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path(env_default("SESSIONIZER_CLUSTER_DIR", ".local-cluster") or ""),
        help="where servers keep data and logs [env: SESSIONIZER_CLUSTER_DIR] "
        "(default: .local-cluster)",
    )


def _print_exports(zk_connect: str, bootstrap: str) -> None:
    print(f"export SESSIONIZER_ZK={shlex.quote(zk_connect)}")
    print(f"export SESSIONIZER_BOOTSTRAP={shlex.quote(bootstrap)}")


def run_up(args: argparse.Namespace) -> int:
    """Start the cluster (or report the one already running in --dir)."""
    existing = running_cluster(args.dir)
    if existing is not None:
        print(f"cluster already running in {args.dir}", file=sys.stderr)
        _print_exports(existing["zk_connect"], existing["bootstrap"])
        return 0
    stop_cluster_dir(args.dir)  # a half-dead earlier cluster: stop what is left of it
    print(
        f"starting {args.zookeepers} ZooKeeper and {args.brokers} Kafka server(s) in {args.dir}...",
        file=sys.stderr,
        flush=True,
    )
    cluster = LocalCluster(
        args.dir, zookeepers=args.zookeepers, brokers=args.brokers, die_with_parent=False
    )
    cluster.up()
    print(f"cluster up; logs under {cluster.directory}/*/server.log", file=sys.stderr)
    _print_exports(cluster.zk_connect, cluster.bootstrap)
    return 0


def run_down(args: argparse.Namespace) -> int:
    """Stop the servers `cluster up` started in --dir."""
    stopped = stop_cluster_dir(args.dir)
    print(f"stopped: {', '.join(stopped) if stopped else 'nothing was running'}", file=sys.stderr)
    return 0
