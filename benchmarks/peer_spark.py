"""Peer: Spark Structured Streaming (PySpark from PyPI) with `session_window` on the Kafka source.

    .venv/bin/python -m benchmarks.peer_spark --bootstrap B --app APP --streams N
        --out-topic T --work-dir DIR --result FILE --fragments F
        [--partitions 4] [--max-offsets-per-trigger 0]

The query, as Spark's guide writes one: `readStream.format("kafka")` on the
stream topics from the earliest offsets, `key IS NOT NULL` (drops the
watermark records), a Python UDF decoding the msgpack value to the request's
bytes and page flag (Spark SQL has no msgpack reader; PyPI's pyspark brings no
pandas/pyarrow, so a plain row UDF), `withWatermark("timestamp", "2 minutes")`,
`groupBy(key, session_window(timestamp, "30 minutes"))` with count/min/max/sum,
append mode, written back to Kafka as JSON, checkpoint in DIR, run with
`trigger(availableNow=True)` so that the query stops when it has read what the
topics held.  The connector jars come from `framework.cluster.artifacts`
(Spark's `spark-sql-kafka-0-10` for this pyspark's version, resolved by Maven).

Local mode uses every core (`local[*]`); `spark.sql.shuffle.partitions` is set
to `--partitions` (the default 200 state-store partitions would mostly measure
task scheduling on 2 cores).  Spark emits a session in append mode only once its
watermark (the largest event time seen minus 2 minutes) passes the session's
end (last event + 30 minutes); there is no end-of-input signal, so the last
half hour of sessions stays in the state store.  Measured: the sum of the
micro-batches' `triggerExecution` times, and the wall time from `start()` to
the end of `awaitTermination()`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.measure import dir_bytes, tree_io
from benchmarks.peer_common import GAP_MS, GRACE_MS, fragment_fields, write_result

__all__ = ["main", "spark_jars"]


def spark_jars() -> list[Path]:
    """The Kafka connector jars for `spark.jars` (Maven-resolved by the project's launcher)."""
    from framework.cluster.artifacts import resolve_artifacts

    artifacts = resolve_artifacts(quiet=True)
    directory = getattr(artifacts, "spark", None)
    if directory is None:
        raise RuntimeError("framework.cluster.artifacts has no `spark` jars in this version")
    jars = sorted(Path(directory).glob("*.jar"))
    if not jars:
        raise RuntimeError(f"no Spark connector jars in {directory}")
    return jars


def _decode(value):  # no type hints: PySpark would try to read a pandas UDF type from them
    import msgpack

    return fragment_fields(msgpack.unpackb(value, raw=False))


def _parse(argv: list[str] | None) -> argparse.Namespace:
    from benchmarks.peer_common import parse_args

    extra = argparse.ArgumentParser(add_help=False)
    extra.add_argument("--partitions", type=int, default=4)
    extra.add_argument(
        "--max-offsets-per-trigger",
        type=int,
        default=0,
        help="0: Spark's default (everything available in one micro-batch)",
    )
    own, rest = extra.parse_known_args(argv if argv is not None else sys.argv[1:])
    args = parse_args(__doc__.split("\n\n")[0], rest)
    args.partitions = own.partitions
    args.max_offsets_per_trigger = own.max_offsets_per_trigger
    return args


def main(argv: list[str] | None = None) -> None:
    """Run the query until it has read everything; write the result file."""
    args = _parse(argv)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StructField, StructType

    checkpoint = args.work_dir / "checkpoint"
    # The Python workers that run the UDF must be this interpreter (the venv's), as a
    # user running Spark from a virtualenv sets it.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    java_tmp = args.work_dir / "java-tmp"
    java_tmp.mkdir(parents=True, exist_ok=True)
    setup_started = time.time()
    spark = (
        SparkSession.builder.master("local[*]")
        .appName("bench-sessions")
        .config("spark.jars", ",".join(str(j) for j in spark_jars()))
        .config("spark.sql.shuffle.partitions", str(args.partitions))
        .config("spark.driver.memory", "2g")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.local.dir", str(args.work_dir / "spark-local"))
        # The driver's own temp files (spark-*, lz4's native library) go with the work dir.
        .config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={java_tmp}")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    try:
        request = F.udf(
            _decode,
            StructType([StructField("bytes", LongType()), StructField("page", LongType())]),
        )
        reader = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", args.bootstrap)
            .option("subscribe", ",".join(args.topics))
            .option("startingOffsets", "earliest")
        )
        if args.max_offsets_per_trigger:
            reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
        records = reader.load()
        fragments = (
            records.where(F.col("key").isNotNull())
            .select(
                F.col("key").cast("string").alias("key"),
                F.col("timestamp"),
                request(F.col("value")).alias("r"),
            )
            .withWatermark("timestamp", f"{GRACE_MS // 1000} seconds")
        )
        sessions = fragments.groupBy(
            F.col("key"), F.session_window(F.col("timestamp"), f"{GAP_MS // 1000} seconds")
        ).agg(
            F.count(F.lit(1)).alias("fragments"),
            F.min("timestamp").alias("first"),
            F.max("timestamp").alias("last"),
            F.sum("r.bytes").alias("bytes"),
            F.sum("r.page").alias("pages"),
        )
        out = sessions.select(
            F.col("key"),
            F.to_json(
                F.struct(
                    F.col("key"),
                    F.unix_millis(F.col("first")).alias("first_ts"),
                    F.unix_millis(F.col("last")).alias("last_ts"),
                    F.col("fragments"),
                    F.col("bytes"),
                    F.col("pages"),
                )
            ).alias("value"),
        )
        started = time.time()
        query = (
            out.writeStream.format("kafka")
            .option("kafka.bootstrap.servers", args.bootstrap)
            .option("topic", args.out_topic)
            .option("checkpointLocation", str(checkpoint))
            .outputMode("append")
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        finished = time.time()
        progress: list[dict[str, Any]] = [dict(p) for p in query.recentProgress]
        batches = [
            {
                "batch": p.get("batchId"),
                "rows": p.get("numInputRows"),
                "trigger_ms": (p.get("durationMs") or {}).get("triggerExecution"),
                "watermark": (p.get("eventTime") or {}).get("watermark"),
            }
            for p in progress
        ]
        write_result(
            args.result,
            setup_s=started - setup_started,
            started_at=started,
            finished_at=finished,
            processing_s=sum((b["trigger_ms"] or 0) for b in batches) / 1000,
            batches=batches,
            records_seen=sum((b["rows"] or 0) for b in batches),
            state_what="checkpoint dir: offsets, commits, state store (final size)",
            state_bytes=dir_bytes(checkpoint),
            state_store_bytes=dir_bytes(checkpoint / "state"),
            disk_written=tree_io(os.getpid()),
            shuffle_partitions=args.partitions,
            spark_version=spark.version,
        )
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
