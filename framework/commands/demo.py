"""`sessionizer demo`: the whole story on a local cluster, stopped again at the end."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from framework.cluster import LocalCluster
from framework.config import ConnectionConfig
from framework.errors import ConfigError
from framework.provision import provision_streams
from router.formats import FORMATS
from router.generator import generate_fragments
from router.ingest import produce_fragments, produce_lines
from router.producer import ProducerConfig, ProducerStats, StreamProducer

__all__ = ["add_parser"]


def add_parser(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    """Register `demo`."""
    parser = subparsers.add_parser(
        "demo", parents=[common], help="run the whole story on a fresh local cluster"
    )
    parser.add_argument("--sessions", type=int, default=3000, help="generated visits")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--streams", type=int, default=16)
    parser.add_argument("--log", type=Path, help="replay this log file instead of generating")
    parser.add_argument("--format", choices=FORMATS, default="apache")
    parser.add_argument("--dir", type=Path, help="cluster directory (default: a temp dir)")
    parser.set_defaults(run=run)


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    """Start the cluster, create streams, produce, report; always stop what was started."""
    if args.log is not None and not args.log.is_file():
        raise ConfigError(f"--log {args.log} is not a file")
    with tempfile.TemporaryDirectory(prefix="sessionizer-demo-") as scratch:
        directory = args.dir or Path(scratch)
        _say(f"[1/3] starting ZooKeeper and Kafka in {directory} (first run downloads jars)...")
        with LocalCluster(directory) as cluster:
            connection = ConnectionConfig(cluster.zk_connect, cluster.bootstrap, args.app)
            _say(f"[2/3] creating {args.streams} streams for app {args.app!r}...")
            provision_streams(connection, args.streams)
            _say("[3/3] producing fragments...")
            stats = _produce(connection, args)
            print(
                f"produced: read {stats.read:,}  parsed {stats.parsed:,}  "
                f"rejected {stats.rejected:,} {dict(stats.reasons)}  sent {stats.sent:,}"
            )
        _say("cluster stopped")
    return 0


def _produce(connection: ConnectionConfig, args: argparse.Namespace) -> ProducerStats:
    config = ProducerConfig(connection.bootstrap, connection.app, args.streams)
    with StreamProducer(config) as producer:
        if args.log is None:
            fragments = generate_fragments(args.sessions, args.seed)
            return produce_fragments(producer, fragments, end_of_input=True)
        with args.log.open(encoding="utf-8", errors="replace", newline="") as lines:
            return produce_lines(producer, lines, args.format, end_of_input=True)
