"""A node's fragments/s against a bare consumer of the same Kafka client, for both clients.

    .venv/bin/python -m benchmarks.node_throughput [--sessions 60000] [--streams 16]

Generated web traffic is produced once (with an end-of-input watermark).  Then,
on the same topics from offset 0, for kafka-python and for confluent-kafka:

- bare consumer: one consumer assigned every stream, polling until the end
  offsets (the ceiling for this client: fetch + decode of records only);
- node: one `sessionizer node --kafka-client CLIENT` process with WebSessions,
  writing sessions to Kafka and committing state to ZooKeeper, timed from its
  first claimed stream to the moment every stream's committed read position is
  the end offset (commit interval 0.2 s, so up to 0.2 s of the time is waiting
  for a commit).
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

from kafka import KafkaConsumer, TopicPartition

from benchmarks.common import print_table, progress, servers, write_json
from benchmarks.measure import reset_app
from framework.kernel.config import ConnectionConfig
from framework.kernel.zookeeper import zookeeper_client
from framework.progress import end_offsets
from framework.provision import provision_streams
from framework.testing.members import wait_for
from framework.testing.nodes import NodeGroup, caught_up, streams_of
from router.generator import generate_fragments
from router.ingest import produce_fragments
from router.producer import ProducerConfig, StreamProducer

__all__ = ["main"]
WEBLOG = "sessionizer.examples.weblog:WebSessions"


def _bare(bootstrap: str, streams: list[str]) -> tuple[int, float]:
    ends = end_offsets(bootstrap, streams)
    partitions = [TopicPartition(s, 0) for s in streams]
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        started, records = time.perf_counter(), 0
        while any(consumer.position(tp) < ends[tp.topic] for tp in partitions):
            for batch in consumer.poll(timeout_ms=500, max_records=2000).values():
                records += len(batch)
        return records, time.perf_counter() - started
    finally:
        consumer.close()


def _bare_confluent(bootstrap: str, streams: list[str]) -> tuple[int, float]:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as ConfluentPartition

    ends = end_offsets(bootstrap, streams)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-bare",
                         "enable.auto.commit": False})  # fmt: skip
    try:
        consumer.assign([ConfluentPartition(s, 0, 0) for s in streams])
        started, records, positions = time.perf_counter(), 0, dict.fromkeys(streams, 0)
        while any(positions[s] < ends[s] for s in streams):
            for message in consumer.consume(num_messages=2000, timeout=0.5):
                if message.error() is None:
                    records += 1
                    positions[message.topic()] = message.offset() + 1
        return records, time.perf_counter() - started
    finally:
        consumer.close()


def _node(connection: ConnectionConfig, streams: list[str], directory: Path, client: str) -> float:
    with (
        NodeGroup(connection, directory, WEBLOG) as group,
        zookeeper_client(connection.zk) as zk,
    ):
        node = group.start("bench", "--commit-interval", "0.2", "--kafka-client", client)
        wait_for(lambda: node.events("stream_resumed"), 60, "the node to claim streams")
        wait_for(lambda: caught_up(zk, connection, streams), 1800, "the node to catch up", 0.05)
        done = time.time()
        first = datetime.fromisoformat(node.events("stream_resumed")[0]["timestamp"]).timestamp()
    return done - first


def main(argv: list[str] | None = None) -> None:
    """Produce once, then time the bare consumer and the node on the same records."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=60_000)
    parser.add_argument("--streams", type=int, default=16)
    args = parser.parse_args(argv)
    with servers() as cluster, tempfile.TemporaryDirectory() as scratch:
        connection = ConnectionConfig(cluster.zk, cluster.bootstrap, f"bench{uuid.uuid4().hex[:8]}")
        provision_streams(connection, args.streams)
        streams = streams_of(connection.app, args.streams)
        progress(f"producing {args.sessions:,} generated sessions...")
        config = ProducerConfig(cluster.bootstrap, connection.app, args.streams)
        with StreamProducer(config) as producer:
            stats = produce_fragments(
                producer, generate_fragments(args.sessions, seed=1), end_of_input=True
            )
        records = sum(end_offsets(cluster.bootstrap, streams).values())
        rows = []
        for client, bare in (("kafka-python", _bare), ("confluent", _bare_confluent)):
            progress(f"{client}: bare consumer reading {records:,} records...")
            read, bare_seconds = bare(cluster.bootstrap, streams)
            progress(f"{client}: a node sessionizing the same records...")
            reset_app(connection, args.streams)
            node_seconds = _node(connection, streams, Path(scratch) / client, client)
            rows += [
                {"reader": f"bare {client} consumer", "records": read, "seconds": bare_seconds,
                 "records_per_s": read / bare_seconds, "ratio_to_bare": 1.0},
                {"reader": f"node, {client}", "records": records, "seconds": node_seconds,
                 "records_per_s": records / node_seconds,
                 "ratio_to_bare": (records / node_seconds) / (read / bare_seconds)},
            ]  # fmt: skip
    print(f"fragments {stats.sent:,} + watermarks = {records:,} records on {args.streams} streams")
    print_table(rows, ["reader", "records", "seconds", "records_per_s", "ratio_to_bare"])
    path = write_json("node_throughput", {"fragments": stats.sent, "results": rows})
    progress(f"results written to {path}")


if __name__ == "__main__":
    main()
