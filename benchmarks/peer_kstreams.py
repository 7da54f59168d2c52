"""Peer: Kafka Streams (the project's Kafka version) with DSL session windows, built from source.

    .venv/bin/python -m benchmarks.peer_kstreams --bootstrap B --app APP --streams N
        --out-topic T --work-dir DIR --result FILE --fragments F [--interval 1] [--eos]

The program is benchmarks/jvm/kstreams (`sessionizer.bench.kstreams.Main`),
built by `benchmarks.peer_jvm` with Maven on first use: `stream(the stream
topics)` -> `processValues` (drops the watermark records: no key or a
`sessionizer-kind` header; decodes the msgpack value to bytes and page flag)
-> `groupByKey()` -> `windowedBy(SessionWindows.ofInactivityGapAndGrace(30
min, 2 min))` -> `aggregate` into the default RocksDB session store (changelog
on) -> `suppress(untilWindowCloses(unbounded()))` -> JSON -> `to(out topic)`.
One stream thread (every stream topic has one partition, so it is one task),
`commit.interval.ms` = the interval (1 s, also for `exactly_once_v2`, whose
default is 100 ms), otherwise Kafka Streams' defaults (10 MB record cache).
`--eos` runs it with `processing.guarantee=exactly_once_v2`, else
`at_least_once`.

End of input: Kafka Streams has none, and `suppress` emits a session only when
stream time passes its close (last event + gap + grace).  Before the JVM
starts, this driver writes one sentinel record (key `~end-of-input~`, empty
value) to a topic of its own, `<out topic>.end`, which the application reads
with the stream topics; its timestamp is the latest record time of the stream
topics (the producer's end-of-input watermark) + gap + grace + 1 s.  Kafka
Streams processes the records of a task in timestamp order when they are
already on the broker (`max.task.idle.ms` 0), so the sentinel comes last; its
time closes every session, and once it has been processed the program closes
the application, whose final commit emits them.  The sentinel is never in the
stream topics, so the peers that run after this one read the same input.

Measured: first input record consumed to the last session handed to the sink;
CPU of the whole JVM (from the kernel when it is reaped) and its CPU at the
first record; state = the bytes of the application's changelog topics on the
broker (session store and suppression buffer) after the run.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from benchmarks.measure import create_topic, dir_bytes, list_topics, topic_bytes, tree_cpu, tree_io
from benchmarks.peer_common import GAP_MS, GRACE_MS, parse_args, write_result
from benchmarks.peer_jvm import (
    classpath,
    ensure_built,
    jvm_figures,
    read_jvm_result,
    run_jvm,
)

__all__ = ["SENTINEL_KEY", "main", "sentinel_time"]

SENTINEL_KEY = b"~end-of-input~"  # the same as Main.SENTINEL_KEY
SENTINEL_MARGIN_MS = 1_000


def sentinel_time(last_event_ms: int) -> int:
    """The sentinel's timestamp: past the close of a session whose last event is the latest."""
    return last_event_ms + GAP_MS + GRACE_MS + SENTINEL_MARGIN_MS


def last_record_time(bootstrap: str, topics: list[str]) -> int:
    """The largest timestamp among the last records of the topics' partitions."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, client_id="bench-end"
    )
    try:
        partitions = [
            TopicPartition(t, p) for t in topics for p in consumer.partitions_for_topic(t) or ()
        ]
        ends = consumer.end_offsets(partitions)
        pending = {tp for tp in partitions if ends[tp] > 0}
        consumer.assign(sorted(pending))
        for tp in pending:
            consumer.seek(tp, ends[tp] - 1)
        latest, deadline = 0, time.monotonic() + 60
        while pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"could not read the last record of {len(pending)} partitions")
            for tp, batch in consumer.poll(timeout_ms=500).items():
                latest = max([latest, *(r.timestamp for r in batch)])
                pending.discard(tp)
        return latest
    finally:
        consumer.close()


def _write_sentinel(bootstrap: str, topic: str, timestamp_ms: int) -> None:
    create_topic(bootstrap, topic)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", client_id="bench-sentinel")
    try:
        producer.send(topic, key=SENTINEL_KEY, value=b"", timestamp_ms=timestamp_ms).get(60)
    finally:
        producer.close()


def _parse(argv: list[str] | None) -> argparse.Namespace:
    extra = argparse.ArgumentParser(add_help=False)
    extra.add_argument("--eos", action="store_true", help="processing.guarantee=exactly_once_v2")
    own, rest = extra.parse_known_args(argv if argv is not None else sys.argv[1:])
    args = parse_args(__doc__.split("\n\n")[0], rest)
    args.guarantee = "exactly_once_v2" if own.eos else "at_least_once"
    return args


def main(argv: list[str] | None = None) -> None:
    """Write the sentinel, run the application to it, write the result file."""
    args = _parse(argv)
    started = time.time()
    ensure_built()
    end_topic = f"{args.out_topic}.end"
    last_event = last_record_time(args.bootstrap, args.topics)
    sentinel = sentinel_time(last_event)
    _write_sentinel(args.bootstrap, end_topic, sentinel)
    # Prefixed by the app, so `delete_app` removes its changelog topics with the app's.
    application_id = f"{args.app}.kstreams-{uuid.uuid4().hex[:6]}"
    state_dir, jvm_result = args.work_dir / "state", args.work_dir / "jvm-result.json"
    command = [
        "java",
        "-Xmx1g",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp",
        classpath("kstreams"),
        "sessionizer.bench.kstreams.Main",
        *("--bootstrap", args.bootstrap, "--topics", ",".join(args.topics)),
        *("--end-topic", end_topic, "--out-topic", args.out_topic),
        *("--application-id", application_id, "--guarantee", args.guarantee),
        *("--commit-ms", str(round(args.interval * 1000)), "--state-dir", str(state_dir)),
        *("--result", str(jvm_result)),
    ]
    print(f"running {args.guarantee} as {application_id}, sentinel at {sentinel}", flush=True)
    run = run_jvm(command)
    if run.code != 0 or not jvm_result.exists():
        raise SystemExit(f"the Kafka Streams JVM exited with {run.code} (its output is above)")
    jvm = read_jvm_result(jvm_result)
    changelogs = [
        t
        for t in list_topics(args.bootstrap)
        if t.startswith(f"{application_id}-") and t.endswith("-changelog")
    ]
    write_result(
        args.result,
        **jvm_figures(jvm, run),
        started_at=started,
        sentinel_at=jvm.get("sentinel_at"),
        closed_at=jvm.get("closed_at"),
        state_what=(
            "changelog topics (RocksDB session store + suppression buffer), bytes on the broker"
        ),
        state_bytes=topic_bytes(args.bootstrap, changelogs),
        changelog_topics=len(changelogs),
        local_state_bytes=dir_bytes(state_dir),
        disk_written=tree_io(os.getpid()),  # the reaped JVM's writes are counted in ours
        driver_cpu_s=tree_cpu(os.getpid()),
        processing_guarantee=jvm.get("processing_guarantee"),
        kafka_streams_version=jvm.get("kafka_streams_version"),
        application_id=application_id,
        last_event_ms=last_event,
        sentinel_ms=sentinel,
    )


if __name__ == "__main__":
    main()
