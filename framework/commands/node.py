"""`sessionizer node --processor MODULE:CLASS [--id ID] [--drain SECONDS]`."""

from __future__ import annotations

import argparse

from framework.commands.options import connection_from_args, env_default
from framework.node.config import NodeConfig, default_node_id
from framework.node.node import Node
from framework.node.runner import run_until_signalled

__all__ = ["add_parser"]


def add_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Register `node`."""
    parser = subparsers.add_parser(
        "node",
        parents=[common],
        help="run one consumer node until SIGTERM/SIGINT",
        description="Claims a fair share of the app's streams, sessionizes them with the "
        "processor, writes finished sessions to <app>.sessions. SIGTERM/SIGINT: commit, "
        "release (or drain) and exit 0 within the session timeout + 5 s (exit 3 if that "
        "deadline passes); a second signal exits at once (130); an unexpected error commits "
        "nothing more and exits 1.",
    )
    parser.add_argument(
        "--processor",
        default=env_default("SESSIONIZER_PROCESSOR"),
        required=env_default("SESSIONIZER_PROCESSOR") is None,
        help="MODULE:CLASS of a StreamProcessor subclass [env: SESSIONIZER_PROCESSOR]",
    )
    parser.add_argument("--id", default=None, help="node id (default: <host>-<pid>)")
    parser.add_argument(
        "--drain",
        type=float,
        default=None,
        metavar="SECONDS",
        help="on SIGTERM, release streams one by one over SECONDS instead of all at once",
    )
    parser.add_argument(
        "--commit-interval", type=float, default=1.0, help="seconds between commits (default 1)"
    )
    parser.add_argument(
        "--session-timeout",
        type=float,
        default=float(env_default("SESSIONIZER_SESSION_TIMEOUT", "10") or 10),
        help="ZooKeeper session timeout in seconds [env: SESSIONIZER_SESSION_TIMEOUT] (default 10)",
    )
    parser.add_argument(
        "--delivery",
        choices=["at-least-once", "at-most-once"],
        default="at-least-once",
        help="flush sessions before committing state (at-least-once, default) or after",
    )
    parser.add_argument(
        "--delivery-timeout",
        type=float,
        default=float(env_default("SESSIONIZER_DELIVERY_TIMEOUT", "30") or 30),
        metavar="SECONDS",
        help="how long output may wait for the brokers' acknowledgement before the streams "
        "are rewound to their last commit [env: SESSIONIZER_DELIVERY_TIMEOUT] (default 30)",
    )
    metrics_port = env_default("SESSIONIZER_METRICS_PORT")
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=int(metrics_port) if metrics_port else None,
        metavar="PORT",
        help="serve Prometheus /metrics, /healthz and /readyz on PORT (0: any free port, "
        "logged as metrics_serving) [env: SESSIONIZER_METRICS_PORT] (default: off)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the node; signals only ask it to stop, the loop does the rest."""
    config = NodeConfig(
        connection=connection_from_args(args),
        processor=args.processor,
        node_id=args.id or default_node_id(),
        commit_interval=args.commit_interval,
        session_timeout=args.session_timeout,
        delivery=args.delivery,
        drain_seconds=args.drain,
        delivery_timeout=args.delivery_timeout,
        metrics_port=args.metrics_port,
    )
    return run_until_signalled(Node(config))
