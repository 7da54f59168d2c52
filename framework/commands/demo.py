"""`sessionizer demo [--log FILE --format FORMAT]`: the whole story on a fresh local cluster."""

from __future__ import annotations

import argparse
from pathlib import Path

from framework.demo import DemoPlan, run_demo, say
from framework.errors import ConfigError
from router.formats import FORMATS, load_format

__all__ = ["add_parser"]


def add_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Register `demo`."""
    parser = subparsers.add_parser(
        "demo",
        parents=[common],
        help="run the whole story on a fresh local cluster, then stop it",
        description="Starts ZooKeeper and Kafka, 3 nodes, produces traffic, kills a node with "
        "kill -9 half-way, and verifies that no session was lost or changed.",
    )
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
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the demo; exit 1 if the verification found a lost or changed session."""
    if args.log is not None and not args.log.is_file():
        raise ConfigError(f"--log {args.log} is not a file")
    plan = DemoPlan(
        directory=args.dir.resolve(),
        streams=args.streams,
        sessions=args.sessions,
        seed=args.seed,
        log=args.log,
        log_format=load_format(args.format),  # a bad --format fails before any server starts
    )
    verification = run_demo(plan)
    say(verification.line())
    return 0 if verification.exact else 1
