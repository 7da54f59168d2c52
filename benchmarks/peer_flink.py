"""Peer: a Flink DataStream job (local MiniCluster, parallelism 1) with session windows.

    .venv/bin/python -m benchmarks.peer_flink --bootstrap B --app APP --streams N
        --out-topic T --work-dir DIR --result FILE --fragments F [--interval 1]

The program is benchmarks/jvm/flink (`sessionizer.bench.flink.Main`), built by
`benchmarks.peer_jvm` with Maven on first use: `KafkaSource` on the stream
topics from the earliest offsets, bounded at the end offsets it finds at start
(Flink's own end of input), a deserializer that drops the watermark records
(no key or a `sessionizer-kind` header) and decodes the msgpack value,
`WatermarkStrategy.forBoundedOutOfOrderness(2 min)` on the record timestamps,
`keyBy(key)`, `EventTimeSessionWindows.withGap(30 min)`, an incremental
`aggregate` with a `ProcessWindowFunction` for the key and window, and a
`KafkaSink` (at-least-once) writing the JSON sessions.  Run in one JVM by
`StreamExecutionEnvironment.getExecutionEnvironment` (a local MiniCluster),
parallelism 1, checkpoints every interval (1 s) to DIR/checkpoints with the
default hashmap state backend.  When the bounded source ends, Flink's final
watermark closes every session still open: no sentinel is needed.

Measured: first input record deserialized to the last session handed to the
sink; CPU of the whole JVM (from the kernel when it is reaped) and its CPU at
the first record; state = the bytes of every checkpoint file written (the
checkpoint dir polled every 0.2 s: Flink deletes a checkpoint once a newer one
completes), with the dir's final size beside it.
"""

from __future__ import annotations

import os
import time
import uuid

from benchmarks.measure import dir_bytes, tree_cpu, tree_io
from benchmarks.peer_common import parse_args, write_result
from benchmarks.peer_jvm import (
    DirWatch,
    classpath,
    ensure_built,
    jvm_figures,
    read_jvm_result,
    run_jvm,
)

__all__ = ["JAVA_OPENS", "main"]

# What Flink's own launcher passes on Java 17 (its `env.java.opts.all`): Flink's
# serializers reach into these JDK packages.
JAVA_OPENS = [
    f"--add-opens=java.base/{package}=ALL-UNNAMED"
    for package in (
        "java.lang",
        "java.lang.reflect",
        "java.io",
        "java.net",
        "java.nio",
        "sun.nio.ch",
        "java.text",
        "java.time",
        "java.util",
        "java.util.concurrent",
        "java.util.concurrent.atomic",
        "java.util.concurrent.locks",
    )
]


def main(argv: list[str] | None = None) -> None:
    """Run the job to the end of its bounded input; write the result file."""
    args = parse_args(__doc__.split("\n\n")[0], argv)
    started = time.time()
    ensure_built()
    checkpoints, jvm_result = args.work_dir / "checkpoints", args.work_dir / "jvm-result.json"
    checkpoints.mkdir(parents=True, exist_ok=True)
    java_tmp = args.work_dir / "java-tmp"  # Flink's blobs and RocksDB-less temp files
    java_tmp.mkdir(parents=True, exist_ok=True)
    group = f"bench-flink-{args.app}-{uuid.uuid4().hex[:6]}"
    command = [
        "java",
        "-Xmx1g",
        f"-Djava.io.tmpdir={java_tmp}",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        # Flink registers the Kafka clients' metrics twice: one warning per name, hundreds.
        "-Dorg.slf4j.simpleLogger.log.org.apache.flink.metrics=error",
        *JAVA_OPENS,
        "-cp",
        classpath("flink"),
        "sessionizer.bench.flink.Main",
        *("--bootstrap", args.bootstrap, "--topics", ",".join(args.topics)),
        *("--out-topic", args.out_topic, "--group", group),
        *("--checkpoint-ms", str(round(args.interval * 1000))),
        *("--checkpoint-dir", str(checkpoints), "--result", str(jvm_result)),
    ]
    print(f"running the job (consumer group {group})", flush=True)
    with DirWatch(checkpoints) as watch:
        run = run_jvm(command)
    if run.code != 0 or not jvm_result.exists():
        raise SystemExit(f"the Flink JVM exited with {run.code} (its output is above)")
    jvm = read_jvm_result(jvm_result)
    write_result(
        args.result,
        **jvm_figures(jvm, run),
        started_at=started,
        job_runtime_s=jvm.get("job_runtime_s"),
        state_what=(
            "checkpoint files written (hashmap state backend, every 1 s; the dir polled "
            "every 0.2 s)"
        ),
        state_bytes=watch.bytes_written,
        checkpoint_files=len(watch.sizes),
        checkpoint_dir_bytes=dir_bytes(checkpoints),
        disk_written=tree_io(os.getpid()),  # the reaped JVM's writes are counted in ours
        driver_cpu_s=tree_cpu(os.getpid()),
        flink_version=jvm.get("flink_version"),
        consumer_group=group,
    )


if __name__ == "__main__":
    main()
