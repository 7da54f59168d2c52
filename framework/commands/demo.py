"""`sessionizer demo [--log FILE --format FORMAT]`: the whole story on a fresh local cluster.

Of the shared cluster options the demo takes `--kafka-client` and
`--kafka-config` (its clients' library and properties); it starts its own
ZooKeeper and Kafka, for app `demo`, so `--zk`, `--bootstrap`, `--app` and
`--zk-auth` do not apply.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from framework.commands.options import Command
from framework.demo_story import DemoPlan, run_demo, say
from framework.kernel.client_settings import read_kafka_properties
from framework.kernel.errors import ConfigError
from router.format_registry import FORMATS, load_format

__all__ = ["add_parser", "plan_from_args"]


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--sessions", type=int, default=3000, help="generated visits (default 3000)"
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the generated traffic")
    parser.add_argument("--streams", type=int, default=16, help="number of streams (default 16)")
    parser.add_argument("--log", type=Path, help="replay this log file instead of generating")
    parser.add_argument(
        "--format",
        default="apache",
        metavar="FORMAT",
        help=f"format of --log: {', '.join(FORMATS)}, or MODULE:NAME for your own "
        "(docs/routing.md; default: apache)",
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path("demo-output"),
        help="servers' data, node logs, the aggregates and the chart (default: ./demo-output)",
    )


def plan_from_args(args: argparse.Namespace) -> DemoPlan:
    """The demo's plan; a bad --log, --format or --kafka-config fails before any server starts."""
    if args.log is not None and not args.log.is_file():
        raise ConfigError(f"--log {args.log} is not a file")
    return DemoPlan(
        directory=args.dir.resolve(),
        streams=args.streams,
        sessions=args.sessions,
        seed=args.seed,
        log=args.log,
        log_format=load_format(args.format),
        kafka_client=args.kafka_client,
        kafka_config=read_kafka_properties(args.kafka_config) if args.kafka_config else {},
    )


def run(args: argparse.Namespace) -> int:
    """Run the demo; exit 1 if the verification found a lost or changed session."""
    verification = run_demo(plan_from_args(args))
    say(verification.line())
    return 0 if verification.exact else 1


DEMO = Command(
    "demo",
    run,
    help="run the whole story on a fresh local cluster, then stop it",
    description="Starts ZooKeeper and Kafka, 3 nodes, produces traffic, kills a node with "
    "kill -9 half-way, and verifies that no session was lost or changed. Every client "
    "it makes or starts uses --kafka-client and --kafka-config; --zk, --bootstrap, --app "
    "and --zk-auth do not apply (its cluster is its own, its app `demo`).",
    options=_options,
)
add_parser = DEMO.register
