"""The broker's own ceiling: Kafka's producer and consumer perf-test tools on the run's cluster.

    .venv/bin/python -m benchmarks.broker_ceiling [--fragments 1000000] [--streams 64]
        [--workload apache]

The physical-limit row of the node benchmarks: what the broker and a Java
client reach on this machine, with no Python in the path.  The workload is
produced once (`StreamProducer`, as for the nodes) to an app's stream topics;
then, with `java -cp <the resolved Kafka jars + kafka-tools>`:

- `org.apache.kafka.tools.consumer.ConsumerPerformance` (kafka-consumer-perf-test)
  reads those same stream topics (`--include`, every record: fragments and
  watermarks) in a fresh group;
- `org.apache.kafka.tools.ProducerPerformance` (kafka-producer-perf-test) sends
  as many records of the workload's mean value size to a fresh topic with as
  many partitions as there are streams (the tool writes one topic; keyless
  records spread over its partitions), with the producer settings of
  `StreamProducer` (acks=all, idempotence, lz4, linger 20 ms, 256 KiB batches).

Each tool's own summary line is parsed into records/s and MB/s (`parse_consumer`,
`parse_producer`).  Consumer records/s count from the first fetch (the tool's
`fetch.nMsg.sec`, group join excluded).  The tools jar is resolved by Maven from
the `kafka-tools` profile of deploy/local/pom.xml (see `tools_classpath`).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import threading
import time
import uuid
import zipfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import progress
from benchmarks.measure import BenchCluster, bench_cluster, delete_app, load_average, save_scenario
from benchmarks.nodes_vs_bare import new_connection
from benchmarks.tables import show
from benchmarks.workload import DEFAULT_FRAGMENTS, WORKLOADS, load, produce
from framework.cluster.artifacts import default_cache_dir, find_pom, resolve_artifacts
from framework.progress import end_offsets
from framework.testing.nodes import streams_of
from router.producer import ProducerConfig
from router.wire import encode_fragment

__all__ = [
    "CONSUMER_CLASS",
    "PRODUCER_CLASS",
    "ToolResult",
    "consumer_class",
    "main",
    "parse_consumer",
    "parse_producer",
    "tools_classpath",
]

PRODUCER_CLASS = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_CLASS = "org.apache.kafka.tools.consumer.ConsumerPerformance"
_CONSUMER_CLASS_3X = "org.apache.kafka.tools.ConsumerPerformance"  # before the consumer package
TOOL_TIMEOUT_S = 1800.0
MB = 1024 * 1024  # the tools' MB


@dataclass(frozen=True)
class ToolResult:
    """One perf-test tool's summary: records, records/s and MB/s."""

    tool: str
    records: int
    records_per_s: float
    mb_per_s: float
    seconds: float | None = None
    latency_avg_ms: float | None = None
    latency_p99_ms: float | None = None


_PRODUCER_LINE = re.compile(
    r"(?P<records>\d+) records sent, (?P<rate>[\d.]+) records/sec \((?P<mb>[\d.]+) MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, [\d.]+ ms max latency"
    r"(?:, \d+ ms 50th, \d+ ms 95th, (?P<p99>\d+) ms 99th)?"
)


def parse_producer(output: str) -> ToolResult:
    """ProducerPerformance's final summary line (the last `... records sent ...` line)."""
    # Progress lines ("... records sent, ... (window)") come every 5 s; the summary is last.
    found = list(_PRODUCER_LINE.finditer(output))
    if not found:
        raise ValueError(f"no ProducerPerformance summary in its output: {output[-400:]!r}")
    line = found[-1]
    return ToolResult(
        "kafka-producer-perf-test",
        int(line["records"]),
        float(line["rate"]),
        float(line["mb"]),
        latency_avg_ms=float(line["avg"]),
        latency_p99_ms=float(line["p99"]) if line["p99"] else None,
    )


def parse_consumer(output: str) -> ToolResult:
    """ConsumerPerformance's CSV summary: the row under its `start.time, end.time, ...` header."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for number, line in enumerate(lines):
        if line.startswith("start.time") and number + 1 < len(lines):
            header = [name.strip() for name in line.split(",")]
            values = [value.strip() for value in lines[number + 1].split(",")]
            if len(values) != len(header):
                break
            row = dict(zip(header, values, strict=True))
            fetch_ms = float(row["fetch.time.ms"])
            return ToolResult(
                "kafka-consumer-perf-test",
                int(row["data.consumed.in.nMsg"]),
                float(row["fetch.nMsg.sec"]),
                float(row["fetch.MB.sec"]),
                seconds=fetch_ms / 1000,
            )
    raise ValueError(f"no ConsumerPerformance summary in its output: {output[-400:]!r}")


def tools_classpath() -> tuple[str, str]:
    """The perf tools' `java -cp` (the broker's Kafka jars + kafka-tools) and consumer class.

    The tools jar comes from the `kafka-tools` profile of deploy/local/pom.xml (its
    transitive dependencies excluded: the broker's jars provide them), resolved once
    per pom version into the same cache as the servers' jars.
    """
    kafka = resolve_artifacts(quiet=True).kafka
    pom = find_pom()
    digest = hashlib.sha256(pom.read_bytes()).hexdigest()[:12]
    target = default_cache_dir() / f"artifacts-{digest}" / "kafka-tools"
    if not (target / ".complete").exists():
        _resolve_tools(pom, target)
    classpath = f"{kafka / '*'}{os.pathsep}{target / '*'}"
    return classpath, consumer_class(target.glob("*.jar"))


def consumer_class(jars: Iterable[Path]) -> str:
    """ConsumerPerformance's class in these jars (Kafka 4.x moved it into a `consumer` package)."""
    entries: set[str] = set()
    for jar in jars:
        with zipfile.ZipFile(jar) as archive:
            entries.update(archive.namelist())
    for name in (CONSUMER_CLASS, _CONSUMER_CLASS_3X):
        if name.replace(".", "/") + ".class" in entries:
            return name
    raise RuntimeError("no ConsumerPerformance class in the kafka-tools jar")


def _resolve_tools(pom: Path, target: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("Maven (mvn) is not on PATH: it resolves the kafka-tools jar")
    progress(f"resolving the kafka-tools jar into {target} (first run only)...")
    staging = target.with_name(f"{target.name}.partial-{uuid.uuid4().hex[:6]}")
    command = [
        mvn, "-q", "-B", "-f", str(pom), "-P", "kafka-tools",
        "dependency:copy-dependencies", f"-DoutputDirectory={staging}",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not any(staging.glob("kafka-tools-*.jar")):
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-10:])
        raise RuntimeError(f"Maven could not resolve the kafka-tools profile of {pom}:\n{tail}")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    (target / ".complete").write_text("")


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if java is None:
        raise RuntimeError("no java on PATH (or JAVA_HOME): the perf tools need Java 17+")
    return java


def _run_tool(classpath: str, main_class: str, arguments: list[str]) -> str:
    """Run one tool; echo its progress lines as they come; return all it printed."""
    command = [_java(), "-Xmx512m", "-cp", classpath, main_class, *arguments]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    timer = threading.Timer(TOOL_TIMEOUT_S, process.kill)  # a hung tool must not hang the run
    timer.start()
    lines: list[str] = []
    try:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if "records sent" in line:  # ProducerPerformance reports every 5 s
                progress(f"    | {line.strip()}")
        code = process.wait()
    finally:
        timer.cancel()
    output = "".join(lines)
    if code != 0:
        raise RuntimeError(f"{main_class} exited {code}: {output.strip()[-600:]}")
    return output


def run_consumer(
    classpath: str, main_class: str, bootstrap: str, app: str, records: int
) -> ToolResult:
    """ConsumerPerformance over every stream topic of `app`, `records` records in all."""
    arguments = [
        *("--bootstrap-server", bootstrap),
        *("--include", re.escape(f"{app}.stream.") + r"\d+"),
        *("--num-records", str(records)),
        *("--group", f"bench-ceiling-{uuid.uuid4().hex[:8]}"),
        *("--timeout", "60000"),
    ]
    return parse_consumer(_run_tool(classpath, main_class, arguments))


def run_producer(
    classpath: str, bootstrap: str, topic: str, records: int, record_size: int
) -> ToolResult:
    """ProducerPerformance: `records` records of `record_size` bytes, StreamProducer's settings."""
    settings = ProducerConfig(bootstrap, "bench", 1).confluent_settings()
    properties = [
        f"{name}={str(value).lower() if isinstance(value, bool) else value}"
        for name, value in settings.items()
        # librdkafka's queue bound is no setting of the Java producer (its buffer.memory is).
        if name not in ("bootstrap.servers", "client.id", "queue.buffering.max.messages")
    ]
    arguments = [
        *("--bootstrap-server", bootstrap, "--topic", topic),
        *("--num-records", str(records), "--record-size", str(record_size)),
        *("--throughput", "-1", "--command-property", *properties),
    ]
    return parse_producer(_run_tool(classpath, PRODUCER_CLASS, arguments))


def _create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from kafka.admin import NewTopic

    from framework.kafka.admin import admin_client, wait_writable

    admin = admin_client(bootstrap, client_id="bench-ceiling")
    try:
        admin.create_topics([NewTopic(name, partitions, 1)], timeout_ms=30_000)
        wait_writable(admin, [name], 60.0, partitions=partitions)
    finally:
        admin.close()


def _measure(cluster: BenchCluster, args: argparse.Namespace) -> tuple[list[Any], dict[str, Any]]:
    classpath, consumer_main = tools_classpath()
    workload = load(args.workload, args.fragments)
    sizes = [len(encode_fragment(f)[1]) for f in workload.fragments]
    record_size = round(sum(sizes) / len(sizes))
    connection = new_connection(cluster, "ceiling")
    topic = f"{connection.app}.perf"
    try:
        produce(workload, connection, args.streams)
        streams = streams_of(connection.app, args.streams)
        records = sum(end_offsets(cluster.bootstrap, streams).values())
        progress(f"  kafka-consumer-perf-test: {records:,} records on {args.streams} topics...")
        consumer = run_consumer(
            classpath, consumer_main, cluster.bootstrap, connection.app, records
        )
        progress(f"    {consumer.records_per_s:,.0f} records/s")
        _create_topic(cluster.bootstrap, topic, args.streams)
        count = len(workload.fragments)
        progress(f"  kafka-producer-perf-test: {count:,} records of {record_size} B...")
        started = time.perf_counter()
        producer = run_producer(classpath, cluster.bootstrap, topic, count, record_size)
        producer = ToolResult(**{**asdict(producer), "seconds": time.perf_counter() - started})
        progress(f"    {producer.records_per_s:,.0f} records/s")
    finally:
        delete_app(connection, [topic])
    extra = {"record_size": record_size, "stream_records": records, "classpath": classpath}
    return [workload.summary(), consumer, producer], extra


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run both tools, print their rows, write <out>/broker_ceiling.json."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=WORKLOADS, default="apache")
    parser.add_argument("--fragments", type=int, default=DEFAULT_FRAGMENTS)
    parser.add_argument("--streams", type=int, default=64)
    args = parser.parse_args(argv)
    load_before = load_average()
    with bench_cluster() as cluster:
        (summary, *results), extra = _measure(cluster, args)
    rows = [{"workload": args.workload, **asdict(result)} for result in results]
    for row in rows:
        row["record_size"] = extra["record_size"]
    columns = ["tool", "records", "records_per_s", "mb_per_s", "record_size", "latency_avg_ms"]
    show(f"broker ceiling: {args.workload}, {args.streams} streams", rows, columns)
    return save_scenario("broker_ceiling", args, [summary], load_before, rows, **extra)


if __name__ == "__main__":
    main()
