"""One bare kafka-python consumer process: the ceiling a node's reading can reach.

    .venv/bin/python -m benchmarks.bare_reader --bootstrap HOST:PORT --start-at EPOCH TOPIC...

Assigns the topics' partition 0, seeks to the beginning, waits until the wall
clock reaches `--start-at` (so that several readers start together, after
their interpreter start-up), then polls until every partition's end offset as
of the start; prints one JSON line: records read, start, finish, CPU seconds.
Only fetch and record decoding (what `KafkaConsumer` does for every reader);
no msgpack, no sessions.  The same `max_poll_records` as a node (2,000).
"""

from __future__ import annotations

import argparse
import json
import os
import time

from kafka import KafkaConsumer, TopicPartition

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    """Read the topics once and print what it took."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--start-at", type=float, required=True)
    parser.add_argument("topics", nargs="+")
    args = parser.parse_args(argv)
    partitions = [TopicPartition(topic, 0) for topic in args.topics]
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap, group_id=None, enable_auto_commit=False
    )
    try:
        consumer.assign(partitions)
        ends = consumer.end_offsets(partitions)
        consumer.seek_to_beginning(*partitions)
        time.sleep(max(0.0, args.start_at - time.time()))
        started, records = time.time(), 0
        pending = {tp for tp in partitions if ends[tp] > 0}
        while pending:
            for tp, batch in consumer.poll(timeout_ms=500, max_records=2000).items():
                records += len(batch)
                if consumer.position(tp) >= ends[tp]:
                    pending.discard(tp)
        finished = time.time()
    finally:
        consumer.close()
    times = os.times()
    print(
        json.dumps(
            {
                "records": records,
                "started": started,
                "finished": finished,
                "cpu_s": times.user + times.system,
            }
        )
    )


if __name__ == "__main__":
    main()
