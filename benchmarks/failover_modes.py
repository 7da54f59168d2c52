"""Scenario 4: one of 3 nodes stops mid-traffic: kill -9, SIGTERM, and SIGTERM with --drain.

    .venv/bin/python -m benchmarks.failover_modes [--workload apache|generated]
        [--fragments 200000] [--streams 64] [--session-timeout 4] [--drain 5] [--repeat 3]

Per run, on a fresh app: nodes n1, n2, n3 (WebSessions, default flags; n2
with `--drain SECONDS` in the drain case) sessionize the first half of the
workload and catch up.  The second half is then produced while they consume,
and when a quarter of it is sent, n2 gets the signal while it is busy: it has
open sessions, and (after kill -9) output since its last commit.  Measured from
the signal:

- `first_resumed_s` / `resumed_s`: until the first / the last of n2's streams
  was resumed by a survivor (its `stream_resumed` log line).  After kill -9 the
  streams wait for n2's ZooKeeper session to expire (`--session-timeout`);
  SIGTERM commits and releases at once; `--drain` releases one stream at a time
  over the drain period while n2 keeps consuming the rest;
- `caught_up_s`: until the survivors own every stream and every stream's
  committed read position is its end offset;
- `replayed`: records the survivors re-read from the safe offsets up to n2's
  last committed position (open sessions are rebuilt from the log, not moved);
- `duplicates`: sessions written twice (same `session_id`, same content) and
  `exact`: no session lost or extra against the batch definition.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import tempfile
import threading
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.common import progress
from benchmarks.measure import (
    BenchCluster,
    StateWatch,
    bench_cluster,
    delete_app,
    load_average,
    save_scenario,
)
from benchmarks.nodes_vs_bare import WEBLOG, new_connection
from benchmarks.tables import show
from benchmarks.workload import WORKLOADS, Workload, load
from framework.config import ConnectionConfig
from framework.progress import end_offsets
from framework.provision import provision_streams
from framework.sessions import read_sessions
from framework.testing.members import claims_by_owner
from framework.testing.nodes import NodeGroup, streams_of
from framework.verify import verify_sessions
from framework.zookeeper import zookeeper_client
from router.fragment import ParsedFragment
from router.producer import ProducerConfig, StreamProducer

__all__ = ["MODES", "main"]

MODES = ("kill -9", "SIGTERM", "SIGTERM --drain")
NODES = ("n1", "n2", "n3")
SURVIVORS = ["n1", "n3"]


class _Producer(threading.Thread):
    """Sends fragments (then end of input) in the background, counting what it sent."""

    def __init__(self, connection: ConnectionConfig, streams: int, fragments: list, end: bool):
        super().__init__(name="bench-producer", daemon=True)
        self.config = ProducerConfig(connection.bootstrap, connection.app, streams)
        self.fragments: list[ParsedFragment] = fragments
        self.end = end
        self.sent = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with StreamProducer(self.config) as producer:
                for fragment in self.fragments:
                    producer.send(fragment)
                    self.sent += 1
                if self.end:
                    producer.end_of_input()
        except BaseException as exc:  # re-raised by the waiting thread
            self.error = exc

    def finish(self, timeout: float) -> None:
        """Wait for the end; raise what the thread raised."""
        self.join(timeout)
        if self.is_alive():
            raise TimeoutError(f"producing did not finish within {timeout:.0f} s")
        if self.error is not None:
            raise RuntimeError(f"producing failed: {self.error!r}") from self.error


def _at(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["timestamp"]).timestamp()


def _wait(watch: StateWatch, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while watch.caught_up_at is None or (watch.members and watch.balanced_at is None):
        watch.check()
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


def _one_run(
    cluster: BenchCluster,
    workload: Workload,
    mode: str,
    args: argparse.Namespace,
    directory: Path,
) -> dict[str, Any]:
    connection = new_connection(cluster, "fail")
    try:
        return _measure(cluster, connection, workload, mode, args, directory)
    finally:
        delete_app(connection)


def _measure(
    cluster: BenchCluster,
    connection: ConnectionConfig,
    workload: Workload,
    mode: str,
    args: argparse.Namespace,
    directory: Path,
) -> dict[str, Any]:
    provision_streams(connection, args.streams)
    streams = streams_of(connection.app, args.streams)
    fragments = workload.fragments
    half = len(fragments) // 2
    first = _Producer(connection, args.streams, fragments[:half], end=False)
    first.start()
    first.finish(600)
    ends = end_offsets(cluster.bootstrap, streams)
    fault = signal.SIGKILL if mode == "kill -9" else signal.SIGTERM
    with (
        NodeGroup(connection, directory, WEBLOG, session_timeout=args.session_timeout) as group,
        zookeeper_client(cluster.zk) as client,
    ):
        with StateWatch(cluster.zk, connection, streams, ends, list(NODES)) as watch:
            for node in NODES:
                drain = ("--drain", str(args.drain)) if node == "n2" and "drain" in mode else ()
                group.start(node, *drain)
            _wait(watch, "3 nodes to balance and catch up on the first half", 600)
        rest = _Producer(connection, args.streams, fragments[half:], end=True)
        rest.start()
        while rest.sent < (len(fragments) - half) // 4 and rest.is_alive():
            time.sleep(0.01)
        owned = claims_by_owner(client, connection.paths).get("n2", set())
        signalled = time.time()
        group.nodes["n2"].send(fault)
        rest.finish(600)
        ends = end_offsets(cluster.bootstrap, streams)
        with StateWatch(cluster.zk, connection, streams, ends, SURVIVORS) as watch:
            _wait(watch, "the survivors to take over and catch up", 900)
        caught_up = max(watch.caught_up_at or 0, watch.balanced_at or 0) - signalled
        taken = [
            e
            for n in SURVIVORS
            for e in group.nodes[n].events("stream_resumed")
            if e["stream"] in owned and _at(e) >= signalled
        ]
        exit_code = group.nodes["n2"].wait(timeout=120) if fault == signal.SIGTERM else None
    resumes = [_at(e) for e in taken]
    complete = {e["stream"] for e in taken} >= owned
    verdict = verify_sessions(
        read_sessions(cluster.bootstrap, connection.app, deduplicate=False),
        workload.expected(),
        len(fragments),
    )
    return {
        "mode": mode,
        "streams_moved": len(owned),
        "first_resumed_s": min(resumes) - signalled if resumes else None,
        "resumed_s": max(resumes) - signalled if complete and resumes else None,
        "caught_up_s": caught_up,
        "replayed": sum(e["committed_offset"] - e["offset"] for e in taken),
        "duplicates": verdict.duplicates,
        "lost": verdict.lost,
        "exact": verdict.exact,
        "n2_exit": exit_code,
    }


MEDIANS = (
    "streams_moved",
    "first_resumed_s",
    "resumed_s",
    "caught_up_s",
    "replayed",
    "duplicates",
)
COLUMNS = ["mode", "runs", *MEDIANS, "exact"]


def _median(mode: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    row: dict[str, Any] = {"mode": mode, "runs": len(runs), "exact": all(r["exact"] for r in runs)}
    for key in MEDIANS:
        values = [r[key] for r in runs if r[key] is not None]
        row[key] = statistics.median(values) if values else None
    return row


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Repeat each mode, print the medians, write benchmarks/out/failover_modes.json."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=WORKLOADS, default="apache")
    parser.add_argument("--fragments", type=int, default=200_000)
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--session-timeout", type=float, default=4.0)
    parser.add_argument("--drain", type=float, default=5.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    load_before = load_average()
    progress(f"building the {args.workload} workload ({args.fragments:,} fragments)...")
    workload = load(args.workload, args.fragments)
    summary = workload.summary()
    runs: list[dict[str, Any]] = []
    with bench_cluster() as cluster, tempfile.TemporaryDirectory() as scratch:
        for i in range(args.repeat):
            for mode in MODES:  # interleaved, so that machine noise hits every mode alike
                progress(f"{mode}: run {i + 1}/{args.repeat}...")
                directory = Path(scratch) / f"run{i}-{uuid.uuid4().hex[:6]}"
                directory.mkdir()
                runs.append(_one_run(cluster, workload, mode, args, directory))
                last = runs[-1]
                progress(
                    f"    resumed in {last['resumed_s']} s, replayed {last['replayed']:,}, "
                    f"duplicates {last['duplicates']}, exact {last['exact']}"
                )
    rows = [_median(mode, [r for r in runs if r["mode"] == mode]) for mode in MODES]
    show(
        f"failover: 3 nodes, {args.streams} streams, {args.fragments:,} {args.workload} "
        f"fragments, session timeout {args.session_timeout} s, drain {args.drain} s, "
        f"median of {args.repeat}",
        rows,
        COLUMNS,
    )
    return save_scenario("failover_modes", args, [summary], load_before, rows, runs=runs)


if __name__ == "__main__":
    main()
