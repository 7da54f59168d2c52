"""One node on the same topics under several client property sets, in turn: CPU, memory, faults.

    .venv/bin/python -m benchmarks.client_properties [--fragments 1000000] [--streams 64]
        [--client confluent|kafka-python] [--repeat 3]
        [--set NAME=[PROPERTY=VALUE,...] ...]

The apache workload is produced once; then each set's node runs in turn (one
`sessionizer node`, WebSessions, from a fresh state, as `benchmarks.nodes_vs_bare`
runs it; a set's properties go in a `--kafka-config` file), the order reversed every
other round so that a drift of the machine falls on every set alike.  Besides
fragments/s and CPU seconds (split into user and kernel time), each run reports the
node's peak resident memory (VmHWM) and its minor page faults, read from /proc every
0.1 s while it runs, and the waits of its loop: the spells of 0.1 s or more in which its
main thread was off the CPU (sampled every 5 ms) between its first stream resumed and
1.2 s before ZooKeeper showed it caught up (its last commit comes up to a commit
interval after its last record).  A node that is behind its streams waits only for
records that did not come.  An empty set is the node's own settings.  The default sets
compare librdkafka's own prefetch settings (`queued.max.messages.kbytes=65536`,
`fetch.queue.backoff.ms=1000`) with the node's (16384 and 100; benchmarks/HOT_PATH.md,
round 15).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.common import print_table, progress
from benchmarks.measure import (
    CLK_TCK,
    BenchCluster,
    bench_cluster,
    delete_app,
    load_average,
    remove_tree,
    save_scenario,
    stat_fields,
)
from benchmarks.nodes_vs_bare import new_connection, run_nodes
from benchmarks.workload import Produced, Workload, load, produce

__all__ = ["ProcWatch", "main", "parse_set"]

DEFAULT_SETS = [
    "librdkafka=queued.max.messages.kbytes=65536,fetch.queue.backoff.ms=1000",
    "node=",
]
_WAIT_S = 0.1  # a wait of the main thread this long is counted
# The last commit shows the node caught up up to a commit interval (1 s) and the watch's
# poll after its last record: its waits in that time are not waits for records.
_CAUGHT_UP_SLACK_S = 1.2


def parse_set(text: str) -> tuple[str, dict[str, str]]:
    """`NAME=PROPERTY=VALUE,...` as (name, properties); `NAME=` is no properties."""
    name, separator, rest = text.partition("=")
    if not separator or not name:
        raise SystemExit(f"--set {text!r}: expected NAME=PROPERTY=VALUE,... or NAME=")
    properties: dict[str, str] = {}
    for item in filter(None, rest.split(",")):
        key, equals, value = item.partition("=")
        if not equals or not key:
            raise SystemExit(f"--set {text!r}: {item!r} is not PROPERTY=VALUE")
        properties[key] = value
    return name, properties


class ProcWatch:
    """A process's minor faults, user and kernel CPU seconds and peak RSS, and the waits of its
    main thread, polled from /proc until it exits (the last values read stay)."""

    def __init__(self, pid: int, interval: float = 0.005) -> None:
        self.pid, self.interval = pid, interval
        self.minor_faults = 0
        self.user_s = self.kernel_s = 0.0
        self.peak_rss_mb = 0
        self.waits: list[tuple[float, float]] = []
        """(when it began, epoch seconds; how long): the main thread off the CPU >= 0.1 s."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="proc-watch", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        waiting_since: float | None = None
        tick = 0
        while not self._stop.is_set():
            try:
                running = stat_fields(f"/proc/{self.pid}/task/{self.pid}/stat")[0] == "R"
                if tick % 20 == 0:
                    self._totals()
            except OSError:
                return  # exited: what was read last stays
            now, tick = time.time(), tick + 1
            if not running and waiting_since is None:
                waiting_since = now
            elif running and waiting_since is not None:
                if now - waiting_since >= _WAIT_S:
                    self.waits.append((waiting_since, now - waiting_since))
                waiting_since = None
            self._stop.wait(self.interval)

    def _totals(self) -> None:
        fields = stat_fields(f"/proc/{self.pid}/stat")
        status = Path(f"/proc/{self.pid}/status").read_text()
        self.minor_faults = int(fields[7])
        self.user_s, self.kernel_s = int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                self.peak_rss_mb = int(line.split()[1]) // 1024

    def loop_waits(self, start: float, end: float) -> list[float]:
        """How long each of the main thread's waits within [start, end] (epoch seconds) was."""
        return [length for began, length in self.waits if began >= start and began + length <= end]

    def stop(self) -> None:
        """Stop polling (the thread ends by itself when the process exits)."""
        self._stop.set()
        self._thread.join(timeout=5)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run every set `--repeat` times on one produced workload; print runs and medians."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--fragments", type=int, default=1_000_000)
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--client", choices=("confluent", "kafka-python"), default="confluent")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--set", dest="sets", nargs="+", default=DEFAULT_SETS)
    args = parser.parse_args(argv)
    sets = dict(parse_set(text) for text in args.sets)
    load_before = load_average()
    workload = load("apache", args.fragments)
    scratch = Path(tempfile.mkdtemp(prefix="client-properties-"))
    rows: list[dict[str, Any]] = []
    try:
        with bench_cluster() as cluster:
            connection = new_connection(cluster, "props")
            try:
                produced = produce(workload, connection, args.streams)
                for round_ in range(args.repeat):
                    order = list(sets.items()) if round_ % 2 == 0 else list(sets.items())[::-1]
                    for name, properties in order:
                        progress(f"[{round_ + 1}/{args.repeat}] {name}: one node...")
                        run, watch = _one_node(
                            cluster, produced, workload, scratch, (name, properties), args.client
                        )
                        rows.append(_row(name, round_ + 1, run, watch))
            finally:
                delete_app(connection)
    finally:
        remove_tree(scratch)
    columns = ["set", "round", "fragments_per_s", "node_cpu_s", "user_s", "kernel_s"]
    columns += ["minor_faults", "peak_rss_mb", "loop_waits", "loop_waits_s", "exact"]
    print_table(rows, columns)
    medians = [_median(name, [r for r in rows if r["set"] == name]) for name in sets]
    print("\nmedians")
    print_table(medians, [c for c in columns if c not in ("round", "exact")])
    return save_scenario(
        "client_properties", args, [workload.summary()], load_before, rows,
        sets=sets, medians=medians,
    )  # fmt: skip


def _one_node(
    cluster: BenchCluster,
    produced: Produced,
    workload: Workload,
    scratch: Path,
    named: tuple[str, dict[str, str]],
    client: str,
) -> tuple[dict[str, Any], ProcWatch]:
    """One node's run with the set's properties, and what its /proc showed."""
    name, properties = named
    extra: tuple[str, ...] = ("--kafka-client", client)
    if properties:
        config = scratch / f"{name}.properties"
        config.write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
        extra += ("--kafka-config", str(config))
    watches: list[ProcWatch] = []
    run = run_nodes(
        cluster, produced, workload, 1, scratch, extra=extra,
        on_started=lambda pids: watches.append(ProcWatch(pids[0])),
    )  # fmt: skip
    for watch in watches:
        watch.stop()
    return run, watches[0]


def _row(name: str, round_: int, run: dict[str, Any], watch: ProcWatch) -> dict[str, Any]:
    waits = watch.loop_waits(run["started_at"], run["caught_up_at"] - _CAUGHT_UP_SLACK_S)
    return {
        "set": name,
        "round": round_,
        "fragments_per_s": round(run["fragments_per_s"]),
        "node_cpu_s": run["node_cpu_s"],
        "user_s": watch.user_s,
        "kernel_s": watch.kernel_s,
        "minor_faults": watch.minor_faults,
        "peak_rss_mb": watch.peak_rss_mb,
        "loop_waits": len(waits),
        "loop_waits_s": round(sum(waits), 2),
        "exact": run["exact"],
    }


def _median(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("fragments_per_s", "node_cpu_s", "user_s", "kernel_s", "minor_faults", "peak_rss_mb")
    keys += ("loop_waits", "loop_waits_s")
    return {"set": name, **{key: statistics.median(r[key] for r in runs) for key in keys}}


if __name__ == "__main__":
    main()
