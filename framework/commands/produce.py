"""`sessionizer produce FILE --format ...` and `sessionizer generate --sessions N`."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import BinaryIO

import structlog

from framework.commands.options import Command, EnvDefault, Subparsers, connection_from_args
from framework.kafka.admin import TIMESTAMP_AHEAD_SETTING
from framework.kafka.errors import ClientError
from framework.kernel.config import ConnectionConfig
from framework.kernel.errors import ConfigError
from framework.kernel.zookeeper import app_client
from framework.node.collector import COLLECTOR_THRESHOLD, tune_collector
from router.format_registry import FORMATS, load_format
from router.formats import syslog_year, with_time_unit
from router.formats_jsonl import TIME_UNITS
from router.formats_sshd import DEFAULT_SYSLOG_YEAR
from router.generator import generate_fragments
from router.ingest import produce_fragments, produce_lines
from router.line_input import read_lines
from router.naming import stream_name
from router.producer import (
    DEFAULT_MAX_AHEAD_MS,
    DEFAULT_WATERMARK_INTERVAL_MS,
    ProducerConfig,
    ProducerStats,
    StreamProducer,
)
from router.producer_registry import ProducerRegistry, default_producer_id
from router.provisioning import CLOCK_ALLOWANCE_MS, topics_max_ahead_ms
from router.registry import streams_for
from router.watermarks import DEFAULT_MAX_LEAD_MS
from router.wire import producer_problem

__all__ = ["add_parser"]

_log = structlog.get_logger("sessionizer.produce")
_MAX_AHEAD_FROM_TOPICS = "topics"


def add_parser(subparsers: Subparsers, common: argparse.ArgumentParser) -> None:
    """Register `produce` and `generate`."""
    for command in (PRODUCE, GENERATE):
        command.register(subparsers, common)


def _produce_options(produce: argparse.ArgumentParser) -> None:
    produce.add_argument("file", help="input file, or - for standard input")
    produce.add_argument(
        "--format",
        required=True,
        metavar="FORMAT",
        help=f"input format: {', '.join(FORMATS)}, or MODULE:NAME for your own "
        "(a Format, a Format class or a function line -> ParsedFragment; see docs/routing.md)",
    )
    produce.add_argument(
        "--year",
        type=int,
        default=EnvDefault("SESSIONIZER_LOG_YEAR"),
        help="year of the first syslog (sshd) line, which carries none; a Dec -> Jan step "
        "starts the next [env: SESSIONIZER_LOG_YEAR] (default: from FILE's modification "
        f"time; {DEFAULT_SYSLOG_YEAR} for standard input)",
    )
    produce.add_argument(
        "--time-unit",
        choices=TIME_UNITS,
        default=None,
        help='jsonl: the unit of a numeric "ts": ms (epoch milliseconds, the default) or s '
        "(epoch seconds, fractions rounded to the millisecond)",
    )
    _shared_options(produce)


def _generate_options(generate: argparse.ArgumentParser) -> None:
    generate.add_argument("--sessions", type=int, required=True, help="number of visits")
    generate.add_argument("--seed", type=int, default=1, help="random seed (default: 1)")
    _shared_options(generate)


def _shared_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--end-of-input", action="store_true", help="finish with an end-of-input watermark"
    )
    parser.add_argument("--json", action="store_true", help="print the counters as JSON")
    parser.add_argument(
        "--watermark-interval",
        type=float,
        default=DEFAULT_WATERMARK_INTERVAL_MS / 1000,
        metavar="SECONDS",
        help="no stream's event time lags the input's by more than this: a stream that "
        "would gets a watermark, so its idle sessions still close "
        f"(default: {DEFAULT_WATERMARK_INTERVAL_MS // 1000})",
    )
    parser.add_argument(
        "--max-lead",
        default=str(DEFAULT_MAX_LEAD_MS // 1000),
        metavar="SECONDS|none",
        help="a fragment dated more than this ahead of the input's clock moves it only when "
        "the next fragment confirms the jump, so one line of a broken clock does not stop "
        "the watermarks; none: every jump at once "
        f"(default: {DEFAULT_MAX_LEAD_MS // 1000}, a processor's default max_lead)",
    )
    parser.add_argument(
        "--max-ahead",
        default=_MAX_AHEAD_FROM_TOPICS,
        metavar="SECONDS|none|topics",
        help="a line dated more than this ahead of this host's clock is rejected "
        "(dated-ahead), not sent: the brokers would refuse it and every record of its batch; "
        f"topics (the default): the stream topics' {TIMESTAMP_AHEAD_SETTING} (an hour "
        f"since Kafka 4) less {CLOCK_ALLOWANCE_MS // 1000} s, or "
        f"{DEFAULT_MAX_AHEAD_MS // 1000} when the brokers do not say; none: no bound",
    )
    parser.add_argument(
        "--producer-id",
        default=EnvDefault("SESSIONIZER_PRODUCER_ID"),
        metavar="ID",
        help="this producer's name among the producers of the app, registered as "
        "producers/<ID> in ZooKeeper and written into its watermarks; several producers "
        "may write the same streams (env SESSIONIZER_PRODUCER_ID; default: <host>-<pid>)",
    )
    parser.add_argument(
        "--streams",
        type=int,
        default=None,
        help="expected stream count (default: the count recorded by `streams create`)",
    )


@contextmanager
def _producer(connection: ConnectionConfig, args: argparse.Namespace) -> Iterator[StreamProducer]:
    """A registered producer for the stream count recorded in ZooKeeper (checked against
    --streams); its ZooKeeper session, its heartbeat, lasts as long as the producer."""
    if not args.watermark_interval > 0:
        raise ConfigError(
            f"--watermark-interval must be > 0 seconds, got {args.watermark_interval}"
        )
    producer_id = args.producer_id or default_producer_id()
    problem = producer_problem(producer_id)
    if problem is not None:
        raise ConfigError(f"--producer-id: {problem}")
    interval_ms = max(1, round(args.watermark_interval * 1000))
    max_lead_ms = _milliseconds_or_none("--max-lead", args.max_lead)
    from_topics = args.max_ahead.strip().lower() == _MAX_AHEAD_FROM_TOPICS
    max_ahead_ms = (
        None
        if from_topics
        else _milliseconds_or_none("--max-ahead", args.max_ahead, words="'none' or 'topics'")
    )
    with ExitStack() as stack:
        client = stack.enter_context(app_client(connection))
        paths = connection.paths
        recorded = streams_for(client, paths.active_streams, connection.app, args.streams)
        names = [stream_name(connection.app, i) for i in range(recorded)]
        if from_topics:
            max_ahead_ms = _max_ahead_of_topics(connection, names)
        config = ProducerConfig(
            connection.bootstrap,
            connection.app,
            recorded,
            watermark_interval_ms=interval_ms,
            max_lead_ms=max_lead_ms,
            max_ahead_ms=max_ahead_ms,
            kafka_config=connection.kafka_config,
            kafka_client=connection.kafka_client,
            producer_id=producer_id,
        )
        registry = ProducerRegistry(client, paths, producer_id, names)
        yield stack.enter_context(StreamProducer(config, registry=registry))


def _max_ahead_of_topics(connection: ConnectionConfig, topics: list[str]) -> int | None:
    """`--max-ahead topics`: the bound the stream topics' brokers apply, less the allowance."""
    try:
        max_ahead_ms = topics_max_ahead_ms(
            connection.bootstrap, topics, properties=connection.kafka_config
        )
    except ClientError as exc:
        # Producing needs no DescribeConfigs permission: say so, and take Kafka 4's default.
        _log.warning(
            "max_ahead_not_read",
            setting=TIMESTAMP_AHEAD_SETTING,
            error=str(exc),
            max_ahead_s=DEFAULT_MAX_AHEAD_MS // 1000,
            hint="grant DescribeConfigs on the stream topics, or set --max-ahead",
        )
        return DEFAULT_MAX_AHEAD_MS
    shown = None if max_ahead_ms is None else max_ahead_ms / 1000
    _log.info("max_ahead_from_topics", setting=TIMESTAMP_AHEAD_SETTING, max_ahead_s=shown)
    return max_ahead_ms


def _milliseconds_or_none(flag: str, text: str, *, words: str = "'none'") -> int | None:
    """A `SECONDS|none` option in milliseconds: seconds > 0, or None for `none`."""
    if text.strip().lower() == "none":
        return None
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not seconds > 0:
        raise ConfigError(f"{flag} must be > 0 seconds or {words}, got {text!r}")
    return max(1, round(seconds * 1000))


def _progress(stats: ProducerStats) -> None:
    print(f"... read {stats.read:,} lines, sent {stats.sent:,}", file=sys.stderr, flush=True)


def _report(stats: ProducerStats, as_json: bool) -> None:
    if as_json:
        print(json.dumps(stats.as_dict()))
        return
    reasons = ", ".join(f"{k}={v}" for k, v in sorted(stats.reasons.items())) or "none"
    print(
        f"read {stats.read:,}  parsed {stats.parsed:,}  rejected {stats.rejected:,} "
        f"({reasons})  sent {stats.sent:,}"
    )


@contextmanager
def _open_input(name: str) -> Iterator[BinaryIO]:
    """FILE, or standard input for `-`, as bytes: `read_lines` decodes both alike."""
    if name == "-":
        yield sys.stdin.buffer
        return
    path = Path(name)
    if not path.is_file():
        raise ConfigError(f"input file {name!r} does not exist or is not a file")
    with path.open("rb") as handle:
        yield handle


def run_produce(args: argparse.Namespace) -> int:
    """Parse FILE and send every fragment; malformed lines are counted, not fatal."""
    connection = connection_from_args(args)
    # A bad --format (or a --time-unit it has no use for) fails before the cluster is touched.
    fmt = with_time_unit(load_format(args.format), args.time_unit)
    tune_collector(COLLECTOR_THRESHOLD)  # as a node's process does (framework.node.collector)
    with _open_input(args.file) as source, _producer(connection, args) as producer:
        stats = produce_lines(
            producer,
            # While no line comes, the producer still reports failures and follows resizes.
            read_lines(source, on_idle=producer.poll),
            fmt,
            year=args.year if args.year is not None else syslog_year(args.file, fmt),
            end_of_input=args.end_of_input,
            progress=_progress,
        )
    _report(stats, args.json)
    return 0


def run_generate(args: argparse.Namespace) -> int:
    """Generate visits deterministically from --seed and send them."""
    if args.sessions < 1:
        raise ConfigError("--sessions must be >= 1")
    connection = connection_from_args(args)
    tune_collector(COLLECTOR_THRESHOLD)
    fragments = generate_fragments(args.sessions, args.seed)
    with _producer(connection, args) as producer:
        stats = produce_fragments(
            producer, fragments, end_of_input=args.end_of_input, progress=_progress
        )
    _report(stats, args.json)
    return 0


PRODUCE = Command(
    "produce",
    run_produce,
    help="parse a log file and route its fragments to streams",
    options=_produce_options,
)
GENERATE = Command(
    "generate",
    run_generate,
    help="route deterministic synthetic web traffic to streams",
    options=_generate_options,
)
