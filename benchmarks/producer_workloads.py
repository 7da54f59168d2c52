"""Scenario 1: `StreamProducer` against a bare `KafkaProducer`, on each workload.

    .venv/bin/python -m benchmarks.producer_workloads [--workload apache|generated|both]
        [--fragments 1000000] [--streams 64] [--repeat 1]

The approach of `benchmarks.producer_throughput`, on the benchmark workloads:
both producers send the same fragments, built before timing, with the same
settings (`ProducerConfig.kafka_settings()`: acks=all, idempotence, lz4,
linger 20 ms, 256 KiB batches) to the stream topics of a fresh app each.  The
bare producer gets keys and values already encoded and the stream already
chosen, so the difference is the cost of routing (BLAKE2b + jump hash),
msgpack encoding, watermarks and counting.  Each is timed from the first send
to the end of its final flush (every record acknowledged).  With `--repeat`,
the runs alternate and the median counts.  Both include kafka-python's
blocking metadata fetch on the first send to each topic; `metadata_warmup_s`
is what that alone takes for all the streams (a fresh producer asking for each
topic's partitions), measured after each run.  `records`: what landed in the
topics, fragments plus (for `StreamProducer`) its watermark records: one to
every stream whose own event time lags the producer's by over a minute, so
sparse streams get many.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from kafka import KafkaProducer

from benchmarks.common import progress
from benchmarks.measure import (
    BenchCluster,
    CpuSampler,
    bench_cluster,
    delete_app,
    load_average,
    save_scenario,
)
from benchmarks.nodes_vs_bare import new_connection
from benchmarks.tables import show
from benchmarks.workload import DEFAULT_FRAGMENTS, WORKLOADS, Workload, load
from framework.harness import streams_of
from framework.progress import end_offsets
from framework.provision import provision_streams
from router.fragment import ParsedFragment
from router.hashing import stream_for_key
from router.naming import stream_name
from router.producer import ProducerConfig, StreamProducer
from router.wire import encode_fragment

__all__ = ["PRODUCERS", "main", "time_bare_producer", "time_stream_producer"]


def time_stream_producer(config: ProducerConfig, fragments: list[ParsedFragment]) -> float:
    with StreamProducer(config) as producer:
        started = time.perf_counter()
        for fragment in fragments:
            producer.send(fragment)
        producer.flush()
        elapsed = time.perf_counter() - started
        if producer.stats.sent != len(fragments):
            raise RuntimeError(f"sent {producer.stats.sent} of {len(fragments)} fragments")
    return elapsed


def time_bare_producer(config: ProducerConfig, fragments: list[ParsedFragment]) -> float:
    topics = [stream_name(config.app, i) for i in range(config.num_streams)]
    prepared = [
        (topics[stream_for_key(f.key, config.num_streams)], *encode_fragment(f), f.timestamp_ms)
        for f in fragments
    ]
    producer = KafkaProducer(**config.kafka_settings())
    try:
        started = time.perf_counter()
        for topic, key, value, timestamp in prepared:
            producer.send(topic, key=key, value=value, partition=0, timestamp_ms=timestamp)
        producer.flush()
        return time.perf_counter() - started
    finally:
        producer.close()


def _metadata_warmup(config: ProducerConfig) -> float:
    """Seconds a fresh KafkaProducer takes to learn every stream topic (both runs pay this)."""
    producer = KafkaProducer(**config.kafka_settings())
    try:
        started = time.perf_counter()
        for i in range(config.num_streams):
            producer.partitions_for(stream_name(config.app, i))
        return time.perf_counter() - started
    finally:
        producer.close()


PRODUCERS = (("bare KafkaProducer", time_bare_producer), ("StreamProducer", time_stream_producer))


def _one_workload(
    cluster: BenchCluster, args: argparse.Namespace, name: str, summaries: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    progress(f"[{name}] building the workload ({args.fragments:,} fragments)...")
    workload: Workload = load(name, args.fragments)
    summaries.append(workload.summary())
    fragments = workload.fragments
    runs: dict[str, list[tuple[float, float | None]]] = {label: [] for label, _ in PRODUCERS}
    warmups: list[float] = []
    records: dict[str, int] = {}
    for i in range(args.repeat):
        for label, run in PRODUCERS:
            connection = new_connection(cluster, "prod")
            try:
                provision_streams(connection, args.streams)
                config = ProducerConfig(cluster.bootstrap, connection.app, args.streams)
                progress(
                    f"[{name}] {label} ({i + 1}/{args.repeat}): "
                    f"sending {len(fragments):,} fragments..."
                )
                with CpuSampler() as cpu:
                    started = time.time()
                    seconds = run(config, fragments)
                    ended = time.time()
                runs[label].append((seconds, cpu.cores_busy(started, ended)))
                warmups.append(_metadata_warmup(config))
                ends = end_offsets(cluster.bootstrap, streams_of(connection.app, args.streams))
                records[label] = sum(ends.values())
                progress(f"    {len(fragments) / seconds:,.0f} fragments/s")
            finally:
                delete_app(connection)
    rows: list[dict[str, Any]] = []
    for label, results in runs.items():
        seconds = statistics.median(s for s, _ in results)
        busy = [b for _, b in results if b is not None]
        rows.append(
            {
                "workload": name,
                "producer": label,
                "fragments": len(fragments),
                "seconds": seconds,
                "fragments_per_s": len(fragments) / seconds,
                "cores_busy": statistics.median(busy) if busy else None,
                "metadata_warmup_s": statistics.median(warmups),
                "records": records[label],
                "runs": [s for s, _ in results],
            }
        )
    for row in rows:
        row["ratio_to_bare"] = row["fragments_per_s"] / rows[0]["fragments_per_s"]
    return rows


COLUMNS = [
    "workload",
    "producer",
    "fragments",
    "records",
    "seconds",
    "fragments_per_s",
    "ratio_to_bare",
    "cores_busy",
    "metadata_warmup_s",
]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the scenario, print the table, write benchmarks/out/producer_workloads.json."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=[*WORKLOADS, "both"], default="both")
    parser.add_argument("--fragments", type=int, default=DEFAULT_FRAGMENTS)
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    names = WORKLOADS if args.workload == "both" else (args.workload,)
    load_before = load_average()
    summaries: list[dict[str, Any]] = []
    with bench_cluster() as cluster:
        rows = [row for name in names for row in _one_workload(cluster, args, name, summaries)]
    show(f"producers: {args.fragments:,} fragments, {args.streams} streams", rows, COLUMNS)
    return save_scenario("producer_workloads", args, summaries, load_before, rows)


if __name__ == "__main__":
    main()
