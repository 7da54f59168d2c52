"""`sessionizer node --processor MODULE:CLASS [--id ID] [--drain SECONDS]`."""

from __future__ import annotations

import argparse

from balancer.config import BALANCE_POLICIES
from framework.commands.options import Command, EnvDefault, connection_from_args, require_streams
from framework.kernel.errors import ConfigError
from framework.node.config import DELIVERIES, NodeConfig, default_node_id
from framework.node.node import Node
from framework.node.runner import run_until_signalled
from framework.zookeeper_session import check_session_timeout

__all__ = ["add_parser"]

SWITCH = ("on", "off")


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--processor",
        default=EnvDefault("SESSIONIZER_PROCESSOR", required=True),
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
        default=EnvDefault("SESSIONIZER_SESSION_TIMEOUT", 10.0),
        help="ZooKeeper session timeout in seconds; refused if the servers would grant another "
        "(their minSessionTimeout..maxSessionTimeout, 4..40 s by default) "
        "[env: SESSIONIZER_SESSION_TIMEOUT] (default 10)",
    )
    parser.add_argument(
        "--delivery",
        choices=list(DELIVERIES),
        default="at-least-once",
        help="flush sessions before committing state (at-least-once, default), after it "
        "(at-most-once), or commit them with it in one Kafka transaction per stream "
        "(exactly-once: readers must use isolation.level=read_committed; docs/exactly-once.md)",
    )
    parser.add_argument(
        "--delivery-timeout",
        type=float,
        default=EnvDefault("SESSIONIZER_DELIVERY_TIMEOUT", 30.0),
        metavar="SECONDS",
        help="how long output may wait for the brokers' acknowledgement before the streams "
        "are rewound to their last commit [env: SESSIONIZER_DELIVERY_TIMEOUT] (default 30)",
    )
    parser.add_argument(
        "--sink-stall-timeout",
        type=float,
        default=EnvDefault("SESSIONIZER_SINK_STALL_TIMEOUT", 300.0),
        metavar="SECONDS",
        help="after output has failed this long with nothing acknowledged, log sink_stalled "
        "and answer /readyz with 503 until it is [env: SESSIONIZER_SINK_STALL_TIMEOUT] "
        "(default 300)",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=EnvDefault("SESSIONIZER_METRICS_PORT"),
        metavar="PORT",
        help="serve Prometheus /metrics, /healthz and /readyz on PORT (0: any free port, "
        "logged as metrics_serving) [env: SESSIONIZER_METRICS_PORT] (default: off)",
    )
    parser.add_argument(
        "--handover",
        choices=SWITCH,
        default=EnvDefault("SESSIONIZER_HANDOVER", "on"),
        help="on planned moves, hand each open engine to the next owner (on), or let it replay "
        "from the safe offset as after a crash (off) [env: SESSIONIZER_HANDOVER] (default on)",
    )
    _add_balance_options(parser)


def _switch(flag: str, value: str) -> bool:
    """`on`/`off` as a bool; an environment default argparse did not check is refused here."""
    if value not in SWITCH:
        raise ConfigError(f"{flag} must be on or off, got {value!r}")
    return value == "on"


def _add_balance_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--balance",
        choices=list(BALANCE_POLICIES),
        default=EnvDefault("SESSIONIZER_BALANCE", "count"),
        help="share streams by count (spread <= 1 stream) or by their published load "
        "(every node within --balance-tolerance of the mean); every node of an app must use "
        "the same [env: SESSIONIZER_BALANCE] (default count)",
    )
    parser.add_argument(
        "--balance-tolerance",
        type=float,
        default=EnvDefault("SESSIONIZER_BALANCE_TOLERANCE", 0.2),
        metavar="FRACTION",
        help="--balance load: how far from the mean node load counts as balanced "
        "[env: SESSIONIZER_BALANCE_TOLERANCE] (default 0.2)",
    )
    parser.add_argument(
        "--balance-interval",
        type=float,
        default=EnvDefault("SESSIONIZER_BALANCE_INTERVAL", 30.0),
        metavar="SECONDS",
        help="--balance load: at most 4 moves per interval, a moved stream stays put for one, "
        "loads are averaged over a third of it [env: SESSIONIZER_BALANCE_INTERVAL] (default 30)",
    )


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
        sink_stall_timeout=args.sink_stall_timeout,
        metrics_port=args.metrics_port,
        balance=args.balance,
        balance_tolerance=args.balance_tolerance,
        balance_interval=args.balance_interval,
        handover=_switch("--handover", args.handover),
    )
    node = Node(config)  # loads the processor: its errors come first
    require_streams(config.connection)  # else the node would wait for ever for streams
    check_session_timeout(config.connection, config.session_timeout)
    return run_until_signalled(node)


NODE = Command(
    "node",
    run,
    help="run one consumer node until SIGTERM/SIGINT",
    description="Claims a fair share of the app's streams, sessionizes them with the "
    "processor, writes finished sessions to <app>.sessions. SIGTERM/SIGINT: commit, "
    "release (or drain) and exit 0 within the session timeout + 5 s (exit 3 if that "
    "deadline passes); a second signal exits at once (130); what it cannot run with (a "
    "processor that does not load, an app without streams, another --delivery than the "
    "app's nodes, a running node's --id) exits 2 with one line; an unexpected error "
    "commits nothing more and exits 1.",
    options=_options,
)
add_parser = NODE.register
