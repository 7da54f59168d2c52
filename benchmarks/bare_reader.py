"""One bare consumer process of one Kafka client: the ceiling a node's reading can reach.

    .venv/bin/python -m benchmarks.bare_reader --bootstrap HOST:PORT --start-at EPOCH
        [--kafka-client kafka-python|confluent] TOPIC...

Assigns the topics' partition 0 from the beginning, waits until the wall clock
reaches `--start-at` (so that several readers start together, after their
interpreter start-up), then polls until every partition's end offset as of the
start; prints one JSON line: records read, start, finish, CPU seconds.  Only
fetch and record decoding (what the client does for every reader); no msgpack,
no sessions.  Batches of 2,000 records, as a node polls them.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable

from framework.kernel.transport import Transport
from framework.progress import end_offsets

__all__ = ["main", "process_arguments", "read_confluent", "read_kafka_python", "report"]

BATCH = 2000
OnBatch = Callable[[int], None]
"""Told the size of each batch as it is read (`benchmarks.bare_relay` writes meanwhile)."""


def read_kafka_python(
    bootstrap: str, topics: list[str], start_at: float, on_batch: OnBatch | None = None
) -> tuple[int, float]:
    """(records, start time) of kafka-python's `KafkaConsumer` reading the topics to their ends
    (`on_batch`: told each batch's size, as it is read)."""
    from kafka import KafkaConsumer, TopicPartition

    partitions = [TopicPartition(topic, 0) for topic in topics]
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        consumer.assign(partitions)
        ends = consumer.end_offsets(partitions)
        consumer.seek_to_beginning(*partitions)
        time.sleep(max(0.0, start_at - time.time()))
        started, records = time.time(), 0
        pending = {tp for tp in partitions if ends[tp] > 0}
        while pending:
            for tp, batch in consumer.poll(timeout_ms=500, max_records=BATCH).items():
                records += len(batch)
                if on_batch is not None:
                    on_batch(len(batch))
                if consumer.position(tp) >= ends[tp]:
                    pending.discard(tp)
        return records, started
    finally:
        consumer.close()


def read_confluent(
    bootstrap: str, topics: list[str], start_at: float, on_batch: OnBatch | None = None
) -> tuple[int, float]:
    """(records, start time) of confluent-kafka's `Consumer` reading the topics to their ends
    (`on_batch`: told each batch's size, as it is read)."""
    from confluent_kafka import Consumer, TopicPartition

    ends = end_offsets(bootstrap, topics)
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench-bare-reader",
         "enable.auto.commit": False, "enable.partition.eof": False}
    )  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, 0, 0) for topic in topics])
        time.sleep(max(0.0, start_at - time.time()))
        started, records = time.time(), 0
        pending = {topic for topic in topics if ends[topic] > 0}
        while pending:
            # consume() waits for a full batch or the timeout: short, or the last
            # partial batch would add its whole timeout to the time.
            messages = consumer.consume(num_messages=BATCH, timeout=0.05)
            for message in messages:
                if message.error() is not None:
                    raise RuntimeError(f"bare confluent reader: {message.error()}")
                records += 1
                topic, offset = message.topic(), message.offset()
                if topic is not None and offset is not None and offset + 1 >= ends[topic]:
                    pending.discard(topic)
            if on_batch is not None and messages:
                on_batch(len(messages))
        return records, started
    finally:
        consumer.close()


def process_arguments(description: str) -> argparse.ArgumentParser:
    """The arguments of every bare process `nodes_vs_bare` starts together: `--bootstrap`,
    `--start-at`, `--kafka-client` and the topics."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--start-at", type=float, required=True)
    parser.add_argument(
        "--kafka-client", choices=("kafka-python", "confluent"), default="kafka-python"
    )
    parser.add_argument("topics", nargs="+")
    return parser


def report(client: Transport, records: int, started: float, **extra: int) -> None:
    """Print the one JSON line `nodes_vs_bare` reads: records, start, finish, CPU seconds."""
    finished, times = time.time(), os.times()
    cpu_s = times.user + times.system
    print(json.dumps({"client": client, "records": records, **extra, "started": started,
                      "finished": finished, "cpu_s": cpu_s}))  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    """Read the topics once and print what it took."""
    args = process_arguments(__doc__.split("\n\n")[0]).parse_args(argv)
    client: Transport = args.kafka_client
    read = read_kafka_python if client == "kafka-python" else read_confluent
    records, started = read(args.bootstrap, args.topics, args.start_at)
    report(client, records, started)


if __name__ == "__main__":
    main()
