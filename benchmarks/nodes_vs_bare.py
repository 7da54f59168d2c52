"""Scenario 2: 1, 2 and 4 nodes sessionizing a workload against as many bare readers, per client.

    .venv/bin/python -m benchmarks.nodes_vs_bare [--workload apache|generated|both]
        [--fragments 1000000] [--streams 64] [--nodes 1 2 4]
        [--clients confluent kafka-python] [--repeat 1]

Each workload is produced once (`StreamProducer`, end-of-input watermark) to
its own app.  Then, on those same topics, for each Kafka client (the
`--kafka-client` of framework/kernel/transport.py) and each node count N:

- bare: N `benchmarks.bare_reader --kafka-client CLIENT` processes, each
  assigned every N-th stream, started together, reading from offset 0 to the
  end (fetch + record decoding only: the ceiling for this client with N
  processes);
- nodes: N `sessionizer node --kafka-client CLIENT --processor
  sessionizer.examples.weblog:WebSessions` processes (otherwise default flags:
  commit every 1 s, at-least-once), started together
  on a fresh ZooKeeper state of the app; timed from the first stream a node
  resumed to the moment ZooKeeper shows every stream's committed read position
  at its end offset (so up to one commit interval of the time is waiting for
  the last commit).  Every session they wrote is checked against the batch
  definition (`exact`: nothing lost, nothing extra);
- relay: N `benchmarks.bare_relay --kafka-client CLIENT` processes, bare readers
  that also write the sessions the nodes wrote (their very bytes, pre-encoded,
  with the node's output producer settings) as they read: a node's own Kafka I/O
  with an engine that costs nothing.

`ratio` is the nodes' fragments/s over the bare readers' of the same client at
the same N: the headline.  `relay_ceiling` (relay over bare readers) is the most
`ratio` could be for any engine, because a node also writes its sessions;
`ratio_to_relay` (nodes over relay) is what the engine, the state and the
commits cost on top of the client's own reading and writing.  `node_per_core` is
fragments per CPU second of the nodes themselves (fragments/s per busy core; their
start-up included).
With `--repeat K` each (client, N) runs K times, bare, nodes and relay in turn, and
its row gives the median of each rate (and the ratios of those medians), the rest
from the nodes' median run, every run's rates under `runs`: a node's time ends at a
once-a-second commit, so one run of about ten seconds lands a tenth above or below
another (benchmarks/HOT_PATH.md, round 15); issue 24 quotes medians of 3.
`cores_busy` is the whole machine's average over the run (Kafka and ZooKeeper
included): near the core count, the machine is the limit.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.common import progress
from benchmarks.measure import (
    BenchCluster,
    CpuSampler,
    CpuTimes,
    StateWatch,
    bench_cluster,
    cpu_seconds,
    delete_app,
    end_offset,
    load_average,
    process_io,
    read_json_topic,
    reset_app,
    save_scenario,
)
from benchmarks.repeats import median_run, medians
from benchmarks.tables import show
from benchmarks.workload import DEFAULT_FRAGMENTS, WORKLOADS, Produced, Workload, load, produce
from framework.kernel.config import ConnectionConfig
from framework.kernel.transport import Transport
from framework.progress import end_offsets
from framework.testing.nodes import NodeGroup, streams_of
from framework.verify import verify_sessions
from router.naming import sessions_topic

__all__ = [
    "CLIENTS",
    "WEBLOG",
    "main",
    "median_row",
    "new_connection",
    "run_bare",
    "run_nodes",
]

WEBLOG = "sessionizer.examples.weblog:WebSessions"
CLIENTS: tuple[Transport, ...] = ("confluent", "kafka-python")


def new_connection(cluster: BenchCluster, prefix: str) -> ConnectionConfig:
    """A fresh app on the run's cluster."""
    return ConnectionConfig(cluster.zk, cluster.bootstrap, f"{prefix}{uuid.uuid4().hex[:8]}")


def run_bare(
    cluster: BenchCluster,
    streams: list[str],
    readers: int,
    client: Transport = "kafka-python",
) -> dict[str, Any]:
    """N bare reader processes of `client` over the streams (reader i takes streams i, i+N, ...)."""
    return _run_together(cluster, "benchmarks.bare_reader", streams, readers, client)


def run_relay(
    cluster: BenchCluster,
    streams: list[str],
    relays: int,
    client: Transport,
    sessions: Path,
    to: str,
) -> dict[str, Any]:
    """N bare relay processes of `client`: bare readers that also write the sessions in
    `sessions` (`run_nodes`' `sessions_file`; relay i writes every N-th) to topic `to`."""
    lines = sessions.read_bytes().splitlines(keepends=True)
    shares = [sessions.with_suffix(f".{i}") for i in range(relays)]
    for i, share in enumerate(shares):
        share.write_bytes(b"".join(lines[i::relays]))
    extra = [("--sessions", str(share), "--to", to) for share in shares]
    outcome = _run_together(cluster, "benchmarks.bare_relay", streams, relays, client, extra)
    if outcome["written"] != len(lines):
        raise RuntimeError(f"bare relays wrote {outcome['written']} of {len(lines)} sessions")
    return outcome


def _run_together(
    cluster: BenchCluster,
    module: str,
    streams: list[str],
    readers: int,
    client: Transport,
    extra: list[tuple[str, ...]] | None = None,
) -> dict[str, Any]:
    """N processes of `module` (a bare reader's command line), started together."""
    start_at = time.time() + 2.0 + 0.7 * readers  # after every interpreter has started
    processes = [
        subprocess.Popen(
            [
                *(sys.executable, "-m", module),
                *("--bootstrap", cluster.bootstrap, "--start-at", str(start_at)),
                *("--kafka-client", client),
                *(extra[i] if extra else ()),
                *streams[i::readers],
            ],
            stdout=subprocess.PIPE,
            env=_child_env(),
        )
        for i in range(readers)
    ]
    time.sleep(max(0.0, start_at - time.time()))
    before = CpuTimes.now()
    try:
        outputs = [json.loads(p.communicate(timeout=3600)[0]) for p in processes]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
                p.wait()
    after, now = CpuTimes.now(), time.time()
    return {
        "records": sum(o["records"] for o in outputs),
        "written": sum(o.get("written", 0) for o in outputs),
        # From the first reader's start: on a busy machine an interpreter may come up
        # after `start_at`, and its start-up must not count as reading time.
        "seconds": max(o["finished"] for o in outputs) - min(o["started"] for o in outputs),
        "late_start_s": max(0.0, max(o["started"] for o in outputs) - start_at),
        "cpu_s": sum(o["cpu_s"] for o in outputs),
        "cores_busy": before.cores_busy(after, now - start_at),
    }


def _child_env() -> dict[str, str]:
    root = str(Path(__file__).resolve().parent.parent)
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{path}" if path else root}


def _at(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["timestamp"]).timestamp()


def run_nodes(
    cluster: BenchCluster,
    produced: Produced,
    workload: Workload,
    nodes: int,
    directory: Path,
    *,
    extra: tuple[str, ...] = (),
    session_timeout: float = 10.0,
    timeout: float = 3600.0,
    on_started: Callable[[list[int]], None] | None = None,
    stall_timeout: float = 120.0,
    sessions_file: Path | None = None,
) -> dict[str, Any]:
    """N nodes sessionize the app's streams from a fresh state; measured and verified.

    `on_started` is called with the nodes' pids once they are spawned (a profiler
    attaches).  No committed progress for `stall_timeout` seconds fails the run (a
    stuck run says so instead of waiting out `timeout`).  `sessions_file` receives the
    sessions written, one `session_id<TAB>JSON` line each (`run_relay` writes them again).
    """
    connection = produced.connection
    reset_app(connection, produced.streams)
    streams = streams_of(connection.app, produced.streams)
    ends = end_offsets(connection.bootstrap, streams)
    records = sum(ends.values())
    topic = sessions_topic(connection.app)
    first_session = end_offset(connection.bootstrap, topic)
    ids = [f"n{i + 1}" for i in range(nodes)]
    zk_written_before = process_io(cluster.zk_pid).get("write_bytes") if cluster.zk_pid else None
    interval = max(0.1, len(streams) / 640)  # bounds the watch's own load on ZooKeeper
    run_dir = directory / f"nodes{nodes}-{uuid.uuid4().hex[:6]}"
    run_dir.mkdir(parents=True)
    with (
        CpuSampler() as cpu,
        StateWatch(cluster.zk, connection, streams, ends, ids, interval) as watch,
        NodeGroup(connection, run_dir, WEBLOG, session_timeout=session_timeout) as group,
    ):
        spawned = time.time()
        for node in ids:
            group.start(node, *extra)
        if on_started is not None:
            on_started([group.nodes[n].process.pid for n in ids])
        last_report = last_moved = time.monotonic()
        seen = -1
        while watch.caught_up_at is None:
            watch.check()
            if watch.committed != seen:
                seen, last_moved = watch.committed, time.monotonic()
            elif time.monotonic() - last_moved > stall_timeout:
                raise TimeoutError(
                    f"{nodes} node(s) committed no progress for {stall_timeout:.0f} s, stuck "
                    f"at {seen:,}/{records:,} records (every stream's committed position "
                    f"is in ZooKeeper under {connection.paths.root}); logs in {run_dir}"
                )
            dead = [n for n in ids if group.nodes[n].process.poll() is not None]
            if dead:
                raise RuntimeError(f"node(s) {dead} exited early; logs in {run_dir}")
            if time.time() - spawned > timeout:
                raise TimeoutError(f"{nodes} node(s) did not catch up within {timeout:.0f} s")
            if time.monotonic() - last_report >= 10:
                last_report = time.monotonic()
                progress(
                    f"    {nodes} node(s): {watch.committed:,}/{records:,} records "
                    f"committed ({time.time() - spawned:.0f} s)"
                )
            time.sleep(0.05)
        node_cpu = sum(cpu_seconds(group.nodes[n].process.pid) for n in ids)
        for node in ids:
            group.nodes[node].send(signal.SIGTERM)
        exits = [group.nodes[n].wait(timeout=60) for n in ids]
        resumed = [_at(e) for n in ids for e in group.nodes[n].events("stream_resumed")]
        joined = [_at(e) for n in ids for e in group.nodes[n].events("node_started")]
    started = min(resumed)
    seconds = watch.caught_up_at - started
    written = read_json_topic(connection.bootstrap, topic, first_session)
    verdict = verify_sessions(written, workload.expected(), len(workload.fragments))
    if sessions_file is not None:
        # The sink's bytes: sorted keys, json's default separators (sessionizer.sinks).
        sessions_file.write_text(
            "".join(f"{s['session_id']}\t{json.dumps(s, sort_keys=True)}\n" for s in written)
        )
    zk_written = None
    if zk_written_before is not None and cluster.zk_pid is not None:
        zk_written = process_io(cluster.zk_pid).get("write_bytes", 0) - zk_written_before
    return {
        "nodes": nodes,
        "streams": len(streams),
        "fragments": len(workload.fragments),
        "records": records,
        "seconds": seconds,
        "fragments_per_s": len(workload.fragments) / seconds,
        "sessions": verdict.sessions_found,
        "sessions_per_s": verdict.sessions_found / seconds,
        "exact": verdict.exact,
        "lost": verdict.lost,
        "extra": verdict.extra,
        "duplicates": verdict.duplicates,
        "node_cpu_s": node_cpu,
        "node_cores": node_cpu / seconds,
        "node_per_core": len(workload.fragments) / node_cpu if node_cpu else None,
        "cores_busy": cpu.cores_busy(started, watch.caught_up_at),
        "converge_s": (watch.balanced_at - spawned) if watch.balanced_at else None,
        "converge_after_join_s": (watch.balanced_at - max(joined))
        if watch.balanced_at and joined
        else None,
        "startup_s": started - spawned,
        "started_at": started,
        "caught_up_at": watch.caught_up_at,
        "state_writes": watch.writes,
        "state_bytes_written": watch.bytes_written,
        "state_bytes_final": watch.final_sizes,
        "state_bytes_peak": watch.peak_sizes,
        "zk_disk_written": zk_written,
        "exit_codes": exits,
    }


def _one_run(
    cluster: BenchCluster,
    produced: Produced,
    workload: Workload,
    client: Transport,
    count: int,
    scratch: Path,
) -> dict[str, Any]:
    """N bare readers, then N nodes, of one client on the produced topics: one row."""
    name = workload.name
    streams = streams_of(produced.connection.app, produced.streams)
    progress(f"[{name}] {client}: {count} bare reader(s)...")
    bare = run_bare(cluster, streams, count, client)
    bare_rate = len(workload.fragments) / bare["seconds"]
    progress(f"    {bare_rate:,.0f} fragments/s")
    progress(f"[{name}] {client}: {count} node(s)...")
    written = scratch / f"sessions-{uuid.uuid4().hex[:6]}"
    node = run_nodes(
        cluster,
        produced,
        workload,
        count,
        scratch,
        extra=("--kafka-client", client),
        sessions_file=written,
    )
    progress(f"    {node['fragments_per_s']:,.0f} fragments/s, exact={node['exact']}")
    progress(f"[{name}] {client}: {count} bare relay(s), writing the nodes' sessions again...")
    relay = run_relay(
        cluster, streams, count, client, written, sessions_topic(produced.connection.app)
    )
    relay_rate = len(workload.fragments) / relay["seconds"]
    progress(f"    {relay_rate:,.0f} fragments/s")
    return {
        "workload": name,
        "client": client,
        "n": count,
        "bare_fragments_per_s": bare_rate,
        "bare_seconds": bare["seconds"],
        "bare_cpu_s": bare["cpu_s"],
        "bare_cores_busy": bare["cores_busy"],
        "bare_late_start_s": bare["late_start_s"],
        # Read and write with no engine: the most any node of this client could do.
        "relay_fragments_per_s": relay_rate,
        "relay_seconds": relay["seconds"],
        "relay_cpu_s": relay["cpu_s"],
        "relay_sessions": relay["written"],
        "relay_ceiling": relay_rate / bare_rate,
        "node_fragments_per_s": node["fragments_per_s"],
        "node_sessions_per_s": node["sessions_per_s"],
        "ratio": node["fragments_per_s"] / bare_rate,
        "ratio_to_relay": node["fragments_per_s"] / relay_rate,
        **{
            k if k.startswith("node") else f"node_{k}": v
            for k, v in node.items()
            if k not in ("fragments_per_s", "sessions_per_s")
        },
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
    connection = new_connection(cluster, "nodes")
    try:
        produced = produce(workload, connection, args.streams)
        return [
            median_row(
                [
                    _one_run(cluster, produced, workload, client, count, scratch)
                    for _ in range(args.repeat)
                ]
            )
            for client in args.clients
            for count in args.nodes
        ]
    finally:
        delete_app(connection)


_RATES = {"bare": "bare_fragments_per_s", "relay": "relay_fragments_per_s",
          "node": "node_fragments_per_s"}  # fmt: skip


def median_row(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One row for repeated runs of a (client, N): median rates and their ratios, the rest
    from the nodes' median run (the lower one of an even count), each run's rates kept."""
    if len(runs) == 1:
        return runs[0]
    row = median_run(runs, "node_fragments_per_s")
    row.update(medians(runs, (*_RATES.values(), "node_per_core")))
    bare, relay, node = (row[key] for key in _RATES.values())
    row.update(ratio=node / bare, relay_ceiling=relay / bare, ratio_to_relay=node / relay)
    row["node_exact"] = all(r["node_exact"] for r in runs)
    for key in ("node_lost", "node_extra", "node_duplicates"):
        row[key] = max(r[key] for r in runs)
    row["runs"] = {name: [r[key] for r in runs] for name, key in _RATES.items()}
    return row


COLUMNS = [
    "workload",
    "client",
    "n",
    "bare_fragments_per_s",
    "relay_fragments_per_s",
    "node_fragments_per_s",
    "ratio",
    "relay_ceiling",
    "ratio_to_relay",
    "node_per_core",
    "node_sessions_per_s",
    "node_seconds",
    "node_cores_busy",
    "node_exact",
]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the scenario, print the table, write benchmarks/out/nodes_vs_bare.json."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=[*WORKLOADS, "both"], default="both")
    parser.add_argument("--fragments", type=int, default=DEFAULT_FRAGMENTS)
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--clients", nargs="+", choices=CLIENTS, default=list(CLIENTS))
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of each (client, N); rows give medians"
    )
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    names = WORKLOADS if args.workload == "both" else (args.workload,)
    load_before = load_average()
    summaries: list[dict[str, Any]] = []
    with bench_cluster() as cluster, tempfile.TemporaryDirectory() as scratch:
        rows = [
            row
            for name in names
            for row in _one_workload(cluster, args, name, Path(scratch), summaries)
        ]
    title = (
        f"nodes vs bare readers: {args.fragments:,} fragments per workload, {args.streams} streams"
    )
    if args.repeat > 1:
        title += f", medians of {args.repeat} runs"
    show(title, rows, COLUMNS)
    return save_scenario("nodes_vs_bare", args, summaries, load_before, rows)


if __name__ == "__main__":
    main()
