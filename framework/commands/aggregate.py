"""`sessionizer aggregate [--once] [--master URL] [--out DIR] [--json]`: PySpark figures."""

from __future__ import annotations

import argparse
import json
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from framework.cluster.artifacts import resolve_artifacts
from framework.commands.interrupts import signals_calling
from framework.commands.options import Command, EnvDefault, require_addresses
from framework.kernel.client_settings import read_kafka_properties
from router.naming import sessions_topic

__all__ = ["add_parser"]


def _options(parser: argparse.ArgumentParser) -> None:
    from sessionizer.aggregation.config import DEFAULT_MASTER, DEFAULT_WATERMARK

    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--once", action="store_true", help="one batch over everything in the topic, then exit"
    )
    mode.add_argument(
        "--available-now",
        action="store_true",
        help="streaming, but stop once what the topic holds now is processed (for cron)",
    )
    parser.add_argument(
        "--master",
        default=EnvDefault("SESSIONIZER_SPARK_MASTER", DEFAULT_MASTER),
        help="Spark master URL: local[N], spark://HOST:PORT, yarn or k8s://https://HOST:PORT "
        "(docs/spark.md); `cluster up --spark-workers N` exports one "
        f"[env: SESSIONIZER_SPARK_MASTER] (default: {DEFAULT_MASTER})",
    )
    parser.add_argument(
        "--out",
        default=EnvDefault("SESSIONIZER_AGGREGATE_OUT"),
        help="directory for the Parquet results, the chart and the streaming checkpoint "
        "[env: SESSIONIZER_AGGREGATE_OUT] (default: aggregates/<app>)",
    )
    parser.add_argument(
        "--watermark",
        default=EnvDefault("SESSIONIZER_AGGREGATE_WATERMARK", DEFAULT_WATERMARK),
        help="streaming: how late (in first_ts) a session may arrive and still count "
        f"[env: SESSIONIZER_AGGREGATE_WATERMARK] (default: {DEFAULT_WATERMARK})",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")


def run(args: argparse.Namespace) -> int:
    """Aggregate, then print the figures as a table or as JSON on stdout."""
    # Imported here: pyspark is only needed by this command.
    from sessionizer.aggregation.config import AggregateJob, SparkSettings
    from sessionizer.aggregation.figures import format_table
    from sessionizer.aggregation.modes import require_topic, run_once, run_streaming
    from sessionizer.aggregation.spark_session import (
        kafka_source_jars,
        spark_session,
        stderr_line,
    )

    require_addresses(args, zk=False, bootstrap=True)
    job = AggregateJob(
        bootstrap=args.bootstrap or "",
        topic=sessions_topic(args.app),
        out=Path(args.out) if args.out else Path("aggregates") / args.app,
        watermark=args.watermark,
        kafka_config=read_kafka_properties(args.kafka_config) if args.kafka_config else {},
    )
    require_topic(
        job.bootstrap, job.topic, job.kafka_config
    )  # before Spark's start-up, which takes seconds
    jars = kafka_source_jars(resolve_artifacts().spark)
    settings = SparkSettings(master=args.master, jars=jars)
    with spark_session(settings) as spark:
        if args.once:
            aggregates = run_once(spark, job)
        else:
            stop = threading.Event()
            with _stop_on_signals(stop):
                if not args.available_now:
                    stderr_line("streaming until interrupted (Ctrl-C prints the figures)")
                aggregates = run_streaming(
                    spark, job, available_now=args.available_now, until=lambda _: stop.is_set()
                )
    print(json.dumps(aggregates.to_json()) if args.json else format_table(aggregates))
    return 0


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """While inside, SIGINT and SIGTERM only set `stop` (main thread only; else a no-op)."""

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    with signals_calling(handler, [signal.SIGINT, signal.SIGTERM]):
        yield


AGGREGATE = Command(
    "aggregate",
    run,
    help="figures per hour and site over the finished sessions (PySpark)",
    description="Read <app>.sessions with Spark's Kafka source, drop duplicate session ids "
    "and compute per hour (UTC) and site: sessions, visitors, mean and p95 duration, pages "
    "per session, bounce rate, and the top landing pages.  Without --once, a streaming "
    "query that resumes from its checkpoint under --out; stop it with Ctrl-C.",
    options=_options,
)
add_parser = AGGREGATE.register
