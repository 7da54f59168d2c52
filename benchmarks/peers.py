"""Scenario 3: peers doing the same sessionization on the same topics, against our node.

    .venv/bin/python -m benchmarks.peers [--workload apache|generated|both]
        [--fragments 1000000] [--streams 64] [--nodes 1 2]
        [--peers bytewax quix spark kstreams kstreams-eos flink]

Per workload: produced once to an app's stream topics; then, one after the
other on those topics, our `sessionizer node`s (WebSessions; 1, then 2 nodes:
Spark's local mode uses both cores) and each peer
(`benchmarks.peer_bytewax`, `benchmarks.peer_quix`, `benchmarks.peer_spark`,
`benchmarks.peer_kstreams` at-least-once and with `--eos`, `benchmarks.peer_flink`,
each a process of its own: see their docstrings for exactly what they run; the
JVM ones are built from benchmarks/jvm/ with Maven on first use).
Same key, same 30-minute gap, same 2-minute allowance for late records.

Per system: fragments/s over its processing time (first record to the end;
for ours to the commit of the end offsets, for Spark the sum of its
micro-batches), the sessions it wrote, and whether they match the batch
definition on the same fragments (`framework.verify.expected_sessions`),
compared by (key, first_ts, last_ts, fragments).  A system without an
end-of-input signal (Quix, Spark) cannot close the sessions still open when the
input ends: those are counted as `open_at_end` and it is checked against the
sessions its own closing rule must have emitted by then.  State: what each
wrote for recovery (ours: ZooKeeper `stream_state` writes; Bytewax: its SQLite
recovery files; Quix: its changelog topics plus local RocksDB; Spark: its
checkpoint directory), and `disk_written`, every byte the process (tree) sent
to the local disk (/proc write_bytes; for ours: the ZooKeeper server's, when
this run started it).  A peer that fails is reported with its error, never
with a number it did not produce.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks import quix_venv
from benchmarks.common import progress
from benchmarks.measure import (
    BenchCluster,
    CpuSampler,
    bench_cluster,
    create_topic,
    delete_app,
    list_topics,
    load_average,
    read_json_topic,
    save_scenario,
    topic_bytes,
)
from benchmarks.nodes_vs_bare import new_connection, run_nodes
from benchmarks.peer_common import GAP_MS, GRACE_MS, progress_path, read_progress
from benchmarks.peer_jvm import jvm_missing, pom_version
from benchmarks.repeats import peer_row
from benchmarks.tables import show
from benchmarks.workload import DEFAULT_FRAGMENTS, WORKLOADS, Produced, Workload, load, produce
from router.hashing import stream_for_key

__all__ = ["PEERS", "main"]

PEERS = ("bytewax", "quix", "spark", "kstreams", "kstreams-eos", "flink")
PACKAGES = {"bytewax": "bytewax", "quix": "quixstreams", "spark": "pyspark"}
# JVM peers: (driver module, its extra flags, the benchmarks/jvm/pom.xml version property).
JVM_PEERS = {
    "kstreams": ("kstreams", [], "kafka.version"),
    "kstreams-eos": ("kstreams", ["--eos"], "kafka.version"),
    "flink": ("flink", [], "flink.version"),
}
Signature = tuple[str, int, int, int]
Closing = Callable[[Signature], bool]


def _version(peer: str) -> str | None:
    if peer in JVM_PEERS:
        return None if jvm_missing() else pom_version(JVM_PEERS[peer][2])
    if peer == "quix":
        return quix_venv.version()
    try:
        return metadata.version(PACKAGES[peer])
    except metadata.PackageNotFoundError:
        return None


def _closing_rule(peer: str, workload: Workload, streams: int) -> Closing:
    """Which expected sessions the peer's own rule must have emitted by the end of input."""
    if peer == "quix":
        # Partition closing: emitted once the stream's time passes last + 1 + 2 gaps + grace.
        top: dict[int, int] = {}
        for f in workload.fragments:
            s = stream_for_key(f.key, streams)
            top[s] = max(top.get(s, 0), f.timestamp_ms)
        after = 2 * GAP_MS + GRACE_MS
        return lambda sig: sig[2] + 1 <= top[stream_for_key(sig[0], streams)] - after
    if peer == "spark":
        # One watermark for the query: the largest event time minus the delay; a session
        # [first, last + gap) is emitted once the watermark reaches its end.
        watermark = max(f.timestamp_ms for f in workload.fragments) - GRACE_MS
        return lambda sig: sig[2] + GAP_MS <= watermark
    return lambda sig: True  # end of input closes everything (ours, Bytewax)


def _verify(written: list[dict[str, Any]], expected: Counter[Signature], rule: Closing) -> dict:
    closed = Counter({sig: n for sig, n in expected.items() if rule(sig)})
    found = Counter((s["key"], s["first_ts"], s["last_ts"], s["fragments"]) for s in written)
    lost, extra = sum((closed - found).values()), sum((found - closed).values())
    return {
        "sessions": len(written),
        "expected": sum(expected.values()),
        "open_at_end": sum(expected.values()) - sum(closed.values()),
        "lost": lost,
        "extra": extra,
        "matches": lost == 0 and extra == 0,
    }


def _run_peer(
    cluster: BenchCluster,
    peer: str,
    produced: Produced,
    workload: Workload,
    scratch: Path,
    args: argparse.Namespace,
) -> dict[str, Any]:
    app = produced.connection.app
    row: dict[str, Any] = {"system": peer, "version": _version(peer)}
    if row["version"] is None:
        if peer in JVM_PEERS:
            return {**row, "error": f"cannot run: {jvm_missing()}"}
        if peer == "quix":
            return {**row, "error": "not installed: python -m benchmarks.quix_venv (make bench)"}
        return {**row, "error": f"not installed: pip install {PACKAGES[peer]}"}
    work = scratch / f"{peer}-{uuid.uuid4().hex[:6]}"
    work.mkdir(parents=True)
    # A topic of this run's own: a repeated run must not read back the sessions of the last.
    out_topic = f"{app}.peer.{work.name}"
    create_topic(cluster.bootstrap, out_topic)
    result_path, log_path = work / "result.json", work / "peer.log"
    module, extra, _ = JVM_PEERS.get(peer, (peer, [], ""))
    command = [
        str(quix_venv.PYTHON) if peer == "quix" else sys.executable,
        "-m",
        f"benchmarks.peer_{module}",
        *extra,
        "--bootstrap",
        cluster.bootstrap,
        "--app",
        app,
        "--streams",
        str(produced.streams),
        "--out-topic",
        out_topic,
        "--work-dir",
        str(work),
        "--result",
        str(result_path),
        "--fragments",
        str(len(workload.fragments)),
        "--interval",
        str(args.interval),
    ]
    progress(f"  {peer} {row['version']}: running (log {log_path})...")
    began = time.time()
    with CpuSampler() as cpu, log_path.open("wb") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=_child_env()
        )
        try:
            code = process.wait(timeout=args.peer_timeout)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            _kill_group(process)
    ended = time.time()
    if code is None:
        return {**row, "error": _timed_out(args.peer_timeout, progress_path(work))}
    if code != 0 or not result_path.exists():
        tail = log_path.read_text(errors="replace").strip().splitlines()[-5:]
        return {**row, "error": f"exit {code}: {' / '.join(tail)[-400:]}"}
    result = json.loads(result_path.read_text())
    written = read_json_topic(cluster.bootstrap, out_topic)
    verdict = _verify(written, workload.expected(), _closing_rule(peer, workload, produced.streams))
    if peer == "spark":
        seconds = result["processing_s"]
        busy = cpu.cores_busy(result["started_at"], result["finished_at"])
    else:
        last = result.get("last_record_at") or result["finished_at"]
        seconds = last - result["first_record_at"]
        busy = cpu.cores_busy(result["first_record_at"], last)
    state = result.get("state_bytes")
    if peer == "quix":
        changelogs = [
            t for t in list_topics(cluster.bootstrap) if t.startswith(result["changelog_prefix"])
        ]
        state = topic_bytes(cluster.bootstrap, changelogs) + result["local_state_bytes"]
        row["changelog_topics"] = len(changelogs)
    return {
        **row,
        "seconds": seconds,
        "wall_s": ended - began,
        "fragments_per_s": len(workload.fragments) / seconds,
        **verdict,
        "state_what": result["state_what"],
        "state_bytes": state,
        "disk_written": result["disk_written"],
        "cpu_s": result["cpu_s"],
        "cpu_s_after_first_record": result.get("cpu_s_after_first_record"),
        "cores_busy": busy,
        "detail": {k: v for k, v in result.items() if k in DETAIL},
    }


DETAIL = (
    "batches",
    "setup_s",
    "records_seen",
    "idle_seconds",
    "late_records",
    "cpu_at_first_record_s",
    "sessions_emitted",
    "max_rss_mib",
    "changelog_topics",
    "local_state_bytes",
    "checkpoint_dir_bytes",
    "checkpoint_files",
    "job_runtime_s",
    "last_event_ms",
    "sentinel_ms",
    "driver_cpu_s",
)


def _per_cpu(row: dict[str, Any], fragments: int) -> None:
    """Fragments per CPU second, with and without the JVM's start-up where it was measured."""
    for cpu, key in (
        ("cpu_s", "fragments_per_cpu_s"),
        ("cpu_s_after_first_record", "fragments_per_cpu_s_after_start"),
    ):
        if row.get(cpu):
            row[key] = fragments / row[cpu]


def _timed_out(budget: float, progress_file: Path) -> str:
    """The error of a peer stopped at its time budget, with how far it had got."""
    done = read_progress(progress_file)
    if not done:
        return f"did not finish within its {budget:.0f} s budget (no progress recorded)"
    # No rate: a peer that read everything may still be closing sessions.
    return (
        f"did not finish within its {budget:.0f} s budget: it had read "
        f"{done['records']:,} input records (fragments and watermarks), the last "
        f"{done['last'] - done['first']:,.0f} s after the first"
    )


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """Kill whatever is left of the peer's process group (Spark's JVM, Python workers)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _child_env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parent.parent)
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{path}" if path else root}


def _ours(
    cluster: BenchCluster,
    produced: Produced,
    workload: Workload,
    nodes: int,
    scratch: Path,
    client: str,
) -> dict[str, Any]:
    progress(f"  sessionizer, {nodes} node(s), {client}: running...")
    began = time.time()
    run = run_nodes(cluster, produced, workload, nodes, scratch, extra=("--kafka-client", client))
    ended = time.time()
    return {
        "system": f"sessionizer ({nodes} node{'s' if nodes > 1 else ''}, {client})",
        "version": metadata.version("sessionizer"),
        "seconds": run["seconds"],
        "wall_s": ended - began,
        "fragments_per_s": run["fragments_per_s"],
        "sessions": run["sessions"],
        "expected": sum(workload.expected().values()),
        "open_at_end": 0,
        "lost": run["lost"],
        "extra": run["extra"],
        "duplicates": run["duplicates"],
        "matches": run["exact"],
        "state_what": "ZooKeeper stream_state writes (each write x its size)",
        "state_bytes": run["state_bytes_written"],
        "state_writes": run["state_writes"],
        "disk_written": run["zk_disk_written"],
        "cpu_s": run["node_cpu_s"],
        "cores_busy": run["cores_busy"],
    }


def _one_workload(
    cluster: BenchCluster,
    args: argparse.Namespace,
    name: str,
    scratch: Path,
    summaries: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    progress(f"[{name}] building the workload ({args.fragments:,} fragments)...")
    workload = load(name, args.fragments)
    summaries.append(workload.summary())
    connection = new_connection(cluster, "peers")
    fragments = len(workload.fragments)
    try:
        produced = produce(workload, connection, args.streams)
        systems: list[Callable[[], dict[str, Any]]] = [
            *(
                partial(_ours, cluster, produced, workload, nodes, scratch, args.kafka_client)
                for nodes in args.nodes
            ),
            *(
                partial(_run_peer, cluster, peer, produced, workload, scratch, args)
                for peer in args.peers
            ),
        ]
        runs: list[list[dict[str, Any]]] = [[] for _ in systems]
        # In turn, run after run: a drift of the machine falls on every system alike.
        for turn in range(args.repeat):
            if args.repeat > 1:
                progress(f"  run {turn + 1} of {args.repeat}")
            for system, done in zip(systems, runs, strict=True):
                row = system()
                _per_cpu(row, fragments)
                done.append(row)
                rate = row.get("fragments_per_s")
                progress(f"    {row['error']}" if rate is None else f"    {rate:,.0f} fragments/s")
        rows = [peer_row(done) for done in runs]
    finally:
        delete_app(connection)
    ours = rows[0]["fragments_per_s"] if rows and "fragments_per_s" in rows[0] else None
    for row in rows:
        row["workload"] = name
        if ours and row.get("fragments_per_s"):
            row["ratio_to_ours"] = row["fragments_per_s"] / ours
    return rows


COLUMNS = [
    "workload",
    "system",
    "version",
    "fragments_per_s",
    "ratio_to_ours",
    "seconds",
    "wall_s",
    "sessions",
    "open_at_end",
    "matches",
    "state_bytes",
    "disk_written",
    "cpu_s",
    "cpu_s_after_first_record",
    "fragments_per_cpu_s",
    "fragments_per_cpu_s_after_start",
    "cores_busy",
]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the scenario, print the table, write benchmarks/out/peers.json."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=[*WORKLOADS, "both"], default="both")
    parser.add_argument("--fragments", type=int, default=DEFAULT_FRAGMENTS)
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--peers", nargs="+", choices=PEERS, default=list(PEERS))
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 2])
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="runs of every system, in turn; each row gives the medians (issue 24 quotes "
        "medians of 3)",
    )
    parser.add_argument(
        "--kafka-client", choices=("confluent", "kafka-python"), default="confluent"
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=1.0,
        help="peers' snapshot/commit interval in seconds (our nodes commit every 1 s)",
    )
    parser.add_argument(
        "--peer-timeout",
        type=float,
        default=3600.0,
        help="seconds each peer may run; one stopped at it is reported with how far it got",
    )
    args = parser.parse_args(argv)
    names = WORKLOADS if args.workload == "both" else (args.workload,)
    load_before = load_average()
    summaries: list[dict[str, Any]] = []
    with bench_cluster() as cluster, tempfile.TemporaryDirectory() as scratch:
        rows = [
            row
            for name in names
            for row in _one_workload(cluster, args, name, Path(scratch), summaries)
        ]
    show(f"peers: {args.fragments:,} fragments per workload, {args.streams} streams", rows, COLUMNS)
    for row in rows:
        if row.get("error"):
            print(f"  {row['workload']} {row['system']}: {row['error']}")
    return save_scenario("peers", args, summaries, load_before, rows)


if __name__ == "__main__":
    main()
