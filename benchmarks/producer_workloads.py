"""Scenario 1: `StreamProducer` against the bare producer of the same client, on each workload.

    .venv/bin/python -m benchmarks.producer_workloads [--workload apache|generated|both]
        [--fragments 200000] [--streams 64] [--repeat 1] [--clients kafka-python confluent]

For each workload and each Kafka client (kafka-python, confluent-kafka), in one
run on one cluster, three producers send the same fragments with the same
settings (`ProducerConfig.kafka_settings()` / `.confluent_settings()`: acks=all,
idempotence, lz4, linger 20 ms, 256 KiB batches; on confluent-kafka a librdkafka
queue of 1,000,000 records, which a short pause of the broker does not fill: with
librdkafka's 100,000 the producers waited for room at such pauses, and the rate
was the broker's, benchmarks/HOT_PATH.md round 22) to the stream topics of a fresh
app each:

- the **bare** producer of that client, handed the topic, key and value already
  computed before the clock starts (the client's own ceiling);
- **bare + encoding**: the same loop, but routing (cached per key) and
  `encode_fragment` happen as it sends: the least any producer of this wire
  format does per fragment;
- `StreamProducer` on that client: routing, encoding, watermarks, counting.

The fragments held in memory (and the bare producer's prepared records) are frozen
out of the cyclic collector's reach before each run (`gc.freeze`), for all three
alike: a real producer does not hold its whole input, and left in, the million
objects every full collection walked were charged to whichever producer allocated
most (benchmarks/HOT_PATH.md, round 16).

All three learn every topic's metadata before the clock starts (one request);
each run is timed from the first send to the end of the final flush (every
record acknowledged).  `ratio` is `StreamProducer`'s fragments/s over the bare
producer's, `ratio_to_encoding` over bare + encoding's; `cpu_ratio` compares
this process's CPU time per fragment (client I/O threads included), steadier
than wall time on a shared machine.  With `--repeat` the runs alternate and the
medians count.

`watermarks`: the watermark records `StreamProducer` wrote (checked against the
topics' end offsets), `share` their fraction of all records.  Metadata, measured
once per workload and client on a fresh producer: `serial_metadata_s`, what
kafka-python's first sends used to cost (one blocking metadata round trip per
topic, 64 in a row); `metadata_s`, the one request `StreamProducer` now makes.

Where the time goes (py-spy, 200 Hz, 150,000-200,000 fragments, 64 streams).
Before (kafka-python only): on generated traffic a third of all records were
watermarks (`send_watermark` was 20% of all samples, and the I/O thread had 50%
more records to send); routing and msgpack encoding were about 9% of the
samples, and kafka-python's own `send` about 80% of the main thread's.  After:
watermarks are 0.5-3.2% of records at 1,000,000 fragments.  On kafka-python,
`KafkaProducer.send` is still about 80% of `StreamProducer`'s main thread
(`RecordAccumulator.append`, a future per record), `encode_fragment` 6% and
watermarks 5% of all samples: what is left of the gap is the encoding the bare
producer is spared, plus smaller batches (a slower sender puts fewer records
into each linger, so the I/O thread works more per record).  On confluent-kafka
the client is cheap (2-3 us of CPU per record) and `encode_fragment` is 38% of
the main thread (msgpack's `packb` alone 28%), the `produce` call 22%, routing
8%, the watermark policy 7%: the bare + encoding row, not the bare one, is the
ceiling a Python producer of this wire format can reach.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from confluent_kafka import Producer
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
from benchmarks.workload import WORKLOADS, Workload, load
from framework.kafka.kafka_python import warm_metadata
from framework.kernel.transport import Transport
from framework.progress import end_offsets
from framework.provision import provision_streams
from framework.testing.nodes import streams_of
from router.fragment import ParsedFragment
from router.hashing import stream_for_key
from router.naming import stream_name
from router.producer import ProducerConfig, StreamProducer
from router.wire import encode_fragment

__all__ = ["BARE", "CLIENTS", "main", "prepare", "time_bare", "time_stream_producer"]

DEFAULT_FRAGMENTS = 200_000
CLIENTS: tuple[Transport, ...] = ("kafka-python", "confluent")
BARE = {"kafka-python": "bare KafkaProducer", "confluent": "bare confluent Producer"}
ENCODING = "bare + encoding"
Prepared = Iterable[tuple[str, bytes, bytes, int]]


def prepare(config: ProducerConfig, fragments: list[ParsedFragment]) -> Prepared:
    """(topic, key, value, event time) of every fragment: what the bare producer is handed."""
    return list(encoding(config, fragments))


def encoding(
    config: ProducerConfig, fragments: list[ParsedFragment]
) -> Iterator[tuple[str, bytes, bytes, int]]:
    """The same, computed as it is consumed: the least any producer of the wire format does."""
    topics = [stream_name(config.app, i) for i in range(config.num_streams)]
    routes: dict[str, str] = {}
    for f in fragments:
        topic = routes.get(f.key)
        if topic is None:
            topic = routes[f.key] = topics[stream_for_key(f.key, config.num_streams)]
        yield (topic, *encode_fragment(f), f.timestamp_ms)


def time_stream_producer(
    config: ProducerConfig, fragments: list[ParsedFragment]
) -> tuple[float, float, int]:
    """(seconds, CPU seconds, watermark records) of `StreamProducer` sending `fragments`."""
    with StreamProducer(config) as producer:
        started, cpu = time.perf_counter(), time.process_time()
        for fragment in fragments:
            producer.send(fragment)
        producer.flush()
        elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        if producer.stats.sent != len(fragments):
            raise RuntimeError(f"sent {producer.stats.sent} of {len(fragments)} fragments")
        return elapsed, cpu, producer.stats.watermarks


def _bare_kafka_python(config: ProducerConfig, prepared: Prepared) -> tuple[float, float]:
    producer = KafkaProducer(**config.kafka_settings())
    try:
        warm_metadata(producer, [stream_name(config.app, i) for i in range(config.num_streams)])
        started, cpu = time.perf_counter(), time.process_time()
        for topic, key, value, timestamp in prepared:
            producer.send(topic, key=key, value=value, partition=0, timestamp_ms=timestamp)
        producer.flush()
        return time.perf_counter() - started, time.process_time() - cpu
    finally:
        producer.close()


def _bare_confluent(config: ProducerConfig, prepared: Prepared) -> tuple[float, float]:
    producer = Producer(config.confluent_settings())
    producer.list_topics(timeout=30)
    produce = producer.produce
    started, cpu = time.perf_counter(), time.process_time()
    for topic, key, value, timestamp in prepared:
        while True:
            try:
                produce(topic, value, key, 0, timestamp=timestamp)
                break
            except BufferError:  # the local queue is full: let librdkafka deliver, then retry
                producer.poll(0.05)
    if producer.flush(120):
        raise RuntimeError("the bare confluent producer did not drain its queue")
    return time.perf_counter() - started, time.process_time() - cpu


def time_bare(client: Transport, config: ProducerConfig, prepared: Prepared) -> tuple[float, float]:
    """(seconds, CPU seconds) of the bare producer of `client` sending `prepared`."""
    run = _bare_kafka_python if client == "kafka-python" else _bare_confluent
    return run(config, prepared)


def _timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def metadata_seconds(client: Transport, config: ProducerConfig) -> dict[str, float | None]:
    """Serial (kafka-python's first sends) and one-request metadata times for all the streams."""
    topics = [stream_name(config.app, i) for i in range(config.num_streams)]
    if client == "confluent":
        producer = Producer(config.confluent_settings())
        return {"serial_metadata_s": None, "metadata_s": _timed(lambda: producer.list_topics())}
    serial, batched = (KafkaProducer(**config.kafka_settings()) for _ in range(2))
    try:
        return {
            "serial_metadata_s": _timed(lambda: [serial.partitions_for(t) for t in topics]),
            "metadata_s": _timed(lambda: warm_metadata(batched, topics)),
        }
    finally:
        serial.close()
        batched.close()


def _one_run(
    cluster: BenchCluster, streams: int, client: Transport, label: str, fragments: list
) -> dict[str, Any]:
    """One producer's run on a fresh app: seconds, CPU, cores busy, records that landed."""
    connection = new_connection(cluster, "prod")
    try:
        provision_streams(connection, streams)
        config = ProducerConfig(cluster.bootstrap, connection.app, streams, kafka_client=client)
        prepared = prepare(config, fragments) if label == BARE[client] else []
        if label == ENCODING:
            prepared = encoding(config, fragments)
        # The harness's data, not the producer's: out of the collector's reach (docstring).
        gc.collect()
        gc.freeze()
        with CpuSampler() as sampler:
            began = time.time()
            if label == "StreamProducer":
                seconds, cpu, watermarks = time_stream_producer(config, fragments)
            else:
                (seconds, cpu), watermarks = time_bare(client, config, prepared), 0
            ended = time.time()
        records = sum(end_offsets(cluster.bootstrap, streams_of(connection.app, streams)).values())
        if records != len(fragments) + watermarks:
            raise RuntimeError(
                f"{label}: {records} records, expected {len(fragments)} + {watermarks}"
            )
        metadata = metadata_seconds(client, config) if label == "StreamProducer" else {}
        return {"seconds": seconds, "cpu": cpu, "busy": sampler.cores_busy(began, ended),
                "watermarks": watermarks, **metadata}  # fmt: skip
    finally:
        gc.unfreeze()
        delete_app(connection)


def _median(runs: list[dict[str, Any]], key: str) -> Any:
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def _client_rows(
    cluster: BenchCluster, args: argparse.Namespace, name: str, fragments: list, client: Transport
) -> list[dict[str, Any]]:
    labels = (BARE[client], ENCODING, "StreamProducer")
    runs: dict[str, list[dict[str, Any]]] = {label: [] for label in labels}
    for i in range(args.repeat):
        for label in labels:
            progress(f"[{name}] {client}: {label} ({i + 1}/{args.repeat}), {len(fragments):,}...")
            run = _one_run(cluster, args.streams, client, label, fragments)
            runs[label].append(run)
            progress(f"    {len(fragments) / run['seconds']:,.0f} fragments/s")
    rows = []
    for label, results in runs.items():
        seconds, watermarks = _median(results, "seconds"), results[0]["watermarks"]
        rows.append({"workload": name, "client": client, "producer": label,
                     "fragments": len(fragments), "records": len(fragments) + watermarks,
                     "watermarks": watermarks, "seconds": seconds,
                     "fragments_per_s": len(fragments) / seconds,
                     "cpu_us": _median(results, "cpu") / len(fragments) * 1e6,
                     "cores_busy": _median(results, "busy"),
                     "serial_metadata_s": _median(runs["StreamProducer"], "serial_metadata_s"),
                     "metadata_s": _median(runs["StreamProducer"], "metadata_s"),
                     "runs": [r["seconds"] for r in results]})  # fmt: skip
    for row in rows:
        row["ratio_to_bare"] = row["fragments_per_s"] / rows[0]["fragments_per_s"]
        row["ratio_to_encoding"] = row["fragments_per_s"] / rows[1]["fragments_per_s"]
        row["cpu_ratio"] = rows[0]["cpu_us"] / row["cpu_us"]
        row["watermark_share"] = row["watermarks"] / row["records"]
    return rows


def summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One line per workload and client: bare and `StreamProducer` side by side."""
    lines = []
    for bare, encoded, ours in zip(rows[::3], rows[1::3], rows[2::3], strict=True):
        lines.append({"workload": ours["workload"], "client": ours["client"],
                      "bare_f_per_s": bare["fragments_per_s"],
                      "encoding_f_per_s": encoded["fragments_per_s"],
                      "stream_producer_f_per_s": ours["fragments_per_s"],
                      "ratio": ours["ratio_to_bare"], "cpu_ratio": ours["cpu_ratio"],
                      "ratio_to_encoding": ours["ratio_to_encoding"],
                      "watermarks": ours["watermarks"], "share": f"{ours['watermark_share']:.2%}",
                      "serial_metadata_s": ours["serial_metadata_s"],
                      "metadata_s": ours["metadata_s"]})  # fmt: skip
    return lines


COLUMNS = [
    "workload",
    "client",
    "bare_f_per_s",
    "encoding_f_per_s",
    "stream_producer_f_per_s",
    "ratio",
    "cpu_ratio",
    "ratio_to_encoding",
    "watermarks",
    "share",
    "serial_metadata_s",
    "metadata_s",
]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the scenario, print the table, write benchmarks/out/producer_workloads.json."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=[*WORKLOADS, "both"], default="both")
    parser.add_argument("--fragments", type=int, default=DEFAULT_FRAGMENTS)
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--clients", nargs="+", choices=CLIENTS, default=list(CLIENTS))
    args = parser.parse_args(argv)
    names = WORKLOADS if args.workload == "both" else (args.workload,)
    load_before = load_average()
    summaries: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    with bench_cluster() as cluster:
        for name in names:
            progress(f"[{name}] building the workload ({args.fragments:,} fragments)...")
            workload: Workload = load(name, args.fragments)
            summaries.append(workload.summary())
            for client in args.clients:
                rows += _client_rows(cluster, args, name, workload.fragments, client)
    title = f"producers: {args.fragments:,} fragments, {args.streams} streams, same run"
    show(title, summary(rows), COLUMNS)
    return save_scenario("producer_workloads", args, summaries, load_before, rows)


if __name__ == "__main__":
    main()
