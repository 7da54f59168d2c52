"""The demo's story on a local cluster: nodes sessionize, one is killed, nothing is lost.

Each step prints what it does; `run_demo` stops every process and server it
started when it returns, raises, or is interrupted (Ctrl-C). Every client it
makes or starts (topic creation, the producer, the nodes, the status and
read-back clients, Spark's Kafka source) gets the plan's Kafka client library
and client properties (`--kafka-client`, `--kafka-config`).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from kazoo.client import KazooClient

from balancer.status import format_table, snapshot
from framework.cluster.artifacts import artifacts_cached, resolve_artifacts
from framework.cluster.launcher import LocalCluster
from framework.cluster.process import wait_until
from framework.kernel.config import ConnectionConfig
from framework.kernel.errors import SessionizerError
from framework.kernel.transport import KafkaClient
from framework.kernel.zookeeper import zookeeper_client
from framework.local_nodes import NodeGroup, claims_by_owner, settled, streams_of
from framework.progress import state_columns
from framework.provision import provision_streams
from framework.sessions import read_sessions
from framework.verify import Verification, expected_sessions, verify_sessions
from router.format_registry import FormatSpec
from router.formats import parse_file
from router.fragment import ParsedFragment
from router.generator import generate_fragments
from router.ingest import produce_fragments
from router.naming import sessions_topic
from router.producer import ProducerConfig, StreamProducer
from sessionizer.aggregation.config import AggregateJob
from sessionizer.examples.weblog import WebSessions

__all__ = [
    "DemoError",
    "DemoPlan",
    "aggregate_job",
    "demo_connection",
    "node_client_flags",
    "producer_config",
    "run_demo",
]

PROCESSOR = "sessionizer.examples.weblog:WebSessions"
NODES = ("n1", "n2", "n3")
VICTIM = "n2"


class DemoError(SessionizerError):
    """The demo's own cross-checks disagree."""


@dataclass(frozen=True)
class DemoPlan:
    """What the demo runs on."""

    directory: Path
    app: str = "demo"
    streams: int = 16
    sessions: int = 3000
    seed: int = 1
    log: Path | None = None
    log_format: FormatSpec = "apache"
    """The format of `log`: a `Format`, a built-in name or MODULE:NAME."""
    session_timeout: float = 4.0
    timeout: float = 600.0
    kafka_client: KafkaClient = "auto"
    """The Kafka client library of every client the demo makes or starts."""
    kafka_config: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Kafka client properties (standard names, `--kafka-config`) for all of them; may hold
    secrets. The demo's cluster is a fresh one without TLS or SASL: security settings
    do not fit it, client tuning (`client.id`, timeouts, ...) does."""


def say(text: str) -> None:
    """One line of the story, on stdout."""
    print(text, flush=True)


def run_demo(plan: DemoPlan) -> Verification:
    """Run the whole story; return the verification of its output."""
    fragments = _input(plan)
    with ExitStack() as stack:
        if not artifacts_cached():
            say("first run: resolving Kafka and ZooKeeper jars from Maven Central (~60 MB)...")
        say(f"[1/7] starting ZooKeeper and Kafka under {plan.directory} ...")
        cluster = stack.enter_context(LocalCluster(plan.directory / "cluster"))
        connection = demo_connection(plan, cluster.zk_connect, cluster.bootstrap)
        say(f"[2/7] creating {plan.streams} streams for app {plan.app!r} ...")
        provision_streams(connection, plan.streams)
        group = stack.enter_context(
            NodeGroup(connection, plan.directory, PROCESSOR, session_timeout=plan.session_timeout)
        )
        flags = node_client_flags(connection, plan.directory)
        stack.callback(_remove, plan.directory / NODE_PROPERTIES)  # it may hold secrets
        zk = stack.enter_context(zookeeper_client(connection.zk))
        verification = _story(plan, connection, group, zk, fragments, flags)
        group.close()  # the nodes are done; free the cores for Spark
        say(f"[7/7] aggregating the sessions with PySpark (--once) into {plan.directory} ...")
        report = _aggregate(connection, plan.directory / "aggregates")
    say("stopped every node and server the demo started")
    say(report.table)
    say(f"chart: {report.chart}")
    if report.sessions != verification.sessions_found:
        raise DemoError(
            f"the aggregation counted {report.sessions} sessions, "
            f"the verification {verification.sessions_found}"
        )
    return verification


def _story(
    plan: DemoPlan,
    connection: ConnectionConfig,
    group: NodeGroup,
    zk: KazooClient,
    fragments: list[ParsedFragment],
    node_flags: list[str],
) -> Verification:
    streams = streams_of(connection.app, plan.streams)
    say(f"[3/7] starting {len(NODES)} nodes ({PROCESSOR}); logs in {plan.directory}")
    for node in NODES:
        group.start(node, *node_flags)
    half = len(fragments) // 2
    say(f"[4/7] producing the first {half:,} of {len(fragments):,} fragments ...")
    _produce(connection, plan.streams, fragments[:half], end=False)
    _watch(zk, connection, lambda: settled(zk, connection, list(NODES), streams), plan)
    _show_table(zk, connection)
    owned = sorted(claims_by_owner(zk, connection.paths).get(VICTIM, set()))
    say(f"[5/7] kill -9 {VICTIM} (it owns {len(owned)} streams, with sessions open) ...")
    group.nodes[VICTIM].send(signal.SIGKILL)
    say(f"      producing the remaining {len(fragments) - half:,} fragments, end of input")
    _produce(connection, plan.streams, fragments[half:], end=True)
    survivors = [n for n in NODES if n != VICTIM]
    _watch(zk, connection, lambda: settled(zk, connection, survivors, streams), plan)
    _show_table(zk, connection)
    say("[6/7] checking the finished sessions against the batch definition ...")
    written = read_sessions(
        connection.bootstrap, connection.app, deduplicate=False, properties=connection.kafka_config
    )
    return verify_sessions(written, expected_sessions(fragments, WebSessions()), len(fragments))


@dataclass(frozen=True)
class AggregateReport:
    """What the demo prints of the aggregation."""

    table: str
    chart: Path
    sessions: int


NODE_PROPERTIES = "kafka-client.properties"
"""The nodes' copy of the plan's client properties, in the demo's directory while it runs."""


def demo_connection(plan: DemoPlan, zk: str, bootstrap: str) -> ConnectionConfig:
    """The demo's connection to its cluster, with the plan's Kafka client and properties."""
    return ConnectionConfig(
        zk, bootstrap, plan.app, kafka_client=plan.kafka_client, kafka_config=plan.kafka_config
    )


def producer_config(connection: ConnectionConfig, streams: int) -> ProducerConfig:
    """The demo's producer: the connection's client library and properties."""
    return ProducerConfig(
        connection.bootstrap,
        connection.app,
        streams,
        kafka_config=connection.kafka_config,
        kafka_client=connection.kafka_client,
    )


def aggregate_job(connection: ConnectionConfig, out: Path) -> AggregateJob:
    """The demo's aggregation: Spark's Kafka source gets the connection's properties."""
    return AggregateJob(
        connection.bootstrap,
        sessions_topic(connection.app),
        out,
        kafka_config=connection.kafka_config,
    )


def node_client_flags(connection: ConnectionConfig, directory: Path) -> list[str]:
    """`sessionizer node` flags for the connection's client library and properties.

    The properties go to `directory/kafka-client.properties` (mode 0600: they may
    hold secrets), which `--kafka-config` names: a path, never a secret, on the
    command line.
    """
    flags = ["--kafka-client", connection.kafka_client]
    if connection.kafka_config:
        path = directory / NODE_PROPERTIES
        _remove(path)  # a leftover of an interrupted run may have other permissions
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        lines = [f"{name}={value}\n" for name, value in connection.kafka_config.items()]
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.writelines(lines)
        flags += ["--kafka-config", str(path)]
    return flags


def _remove(path: Path) -> None:
    path.unlink(missing_ok=True)


def _aggregate(connection: ConnectionConfig, out: Path) -> AggregateReport:
    # Imported here: pyspark is heavy and only this step needs it.
    from sessionizer.aggregation.config import SparkSettings
    from sessionizer.aggregation.figures import format_table
    from sessionizer.aggregation.modes import run_once
    from sessionizer.aggregation.spark_session import kafka_source_jars, spark_session

    job = aggregate_job(connection, out)
    settings = SparkSettings(jars=kafka_source_jars(resolve_artifacts().spark))
    with spark_session(settings) as spark:
        aggregates = run_once(spark, job, say=lambda line: say("      " + line))
    return AggregateReport(format_table(aggregates), job.chart_path, aggregates.total_sessions)


def _input(plan: DemoPlan) -> list[ParsedFragment]:
    if plan.log is None:
        return list(generate_fragments(plan.sessions, plan.seed))
    return parse_file(plan.log, plan.log_format)


def _produce(
    connection: ConnectionConfig, streams: int, fragments: list[ParsedFragment], *, end: bool
) -> None:
    with StreamProducer(producer_config(connection, streams)) as producer:
        produce_fragments(producer, fragments, end_of_input=end)


def _watch(
    zk: KazooClient, connection: ConnectionConfig, done: Callable[[], bool], plan: DemoPlan
) -> None:
    """Print one status line a second until `done()`."""
    last = 0.0

    def check() -> bool:
        nonlocal last
        if time.monotonic() - last >= 1.0:
            last = time.monotonic()
            say("      " + _summary(zk, connection))
        return done()

    wait_until(check, plan.timeout, "the nodes to settle", interval=0.2)


def _summary(zk: KazooClient, connection: ConnectionConfig) -> str:
    status = snapshot(zk, connection.paths, columns=state_columns(zk, connection))
    owners = " ".join(f"{c['id']}={len(c['streams'])}" for c in status["consumers"])
    rows = status["streams"]
    done = sum(1 for r in rows if r["end_offset"] is not None
               and r["committed_offset"] == r["end_offset"])  # fmt: skip
    unowned = sum(1 for r in rows if r["owner"] is None)
    open_sessions = sum(r["open_sessions"] for r in rows)
    return (f"owners: {owners or '-'} | unowned {unowned} | caught up {done}/{len(rows)} "
            f"| open sessions {open_sessions}")  # fmt: skip


def _show_table(zk: KazooClient, connection: ConnectionConfig) -> None:
    status = snapshot(zk, connection.paths, columns=state_columns(zk, connection))
    for line in format_table(status).splitlines():
        say("      " + line)
