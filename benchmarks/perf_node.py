"""Where a node's CPU goes natively: `perf record` on one node, every thread, by library and symbol.

    .venv/bin/python -m benchmarks.perf_node [--fragments 1000000] [--streams 64]
        [--client confluent|kafka-python] [--frequency 1999] [--top 40] [--keep FILE]
        [--call-graph]

`benchmarks.profile_node` samples Python frames (py-spy) and cannot see what is not
Python: librdkafka's threads, the kernel, the allocator, the collector, the compiled
modules' C.  This runs the same node as `benchmarks.nodes_vs_bare` (the apache workload
produced once, one `sessionizer node`, WebSessions, from a fresh state) under
`perf record -F FREQUENCY -p PID` from its spawn to its exit, then prints `perf
report`'s shares of the node's samples by thread, by shared object (`libpython` is the
interpreter and its runtime, the `__mypyc` library the compiled engine, `_sessionizer_*`
the Rust modules) and the `--top` symbols.  Needs `perf` (linux-tools) and the right to
profile (root, or `perf_event_paranoid` <= 1).

`--call-graph` records call chains (`perf record -g`) and adds each thread's share of
the samples spent in page faults (a chain through the kernel's `exc_page_fault`):
memory touched for the first time, which no symbol of the node's own shows
(benchmarks/HOT_PATH.md, round 15: librdkafka's fetch thread).
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import progress
from benchmarks.measure import bench_cluster, delete_app, load_average, save_scenario
from benchmarks.nodes_vs_bare import new_connection, run_nodes
from benchmarks.workload import load, produce

__all__ = ["fault_shares", "main", "parse_report"]

_LINE = re.compile(r"^\s*(?P<share>\d+\.\d+)%\s+(?P<name>.+?)\s*$")


def parse_report(text: str) -> list[tuple[float, str]]:
    """(percent, what) of each row of `perf report --stdio -q -g none` output."""
    rows = []
    for line in text.splitlines():
        match = _LINE.match(line)
        if match:
            rows.append((float(match["share"]), " ".join(match["name"].split())))
    return rows


def fault_shares(script: str) -> list[tuple[float, str]]:
    """(percent of all samples, thread) in page faults, from `perf script` output with chains."""
    faults: dict[str, int] = {}
    samples = 0
    for block in script.split("\n\n"):
        lines = block.strip().splitlines()
        if not lines:
            continue
        samples += 1
        if any("exc_page_fault" in line for line in lines[1:]):
            thread = lines[0].split()[0]
            faults[thread] = faults.get(thread, 0) + 1
    ranked = sorted(faults.items(), key=lambda item: -item[1])
    return [(100.0 * count / samples, thread) for thread, count in ranked]


def _faults(data: Path) -> list[tuple[float, str]]:
    run = subprocess.run(
        ["perf", "script", "-i", str(data)], capture_output=True, text=True, check=True
    )
    return fault_shares(run.stdout)


def _report(data: Path, sort: str) -> list[tuple[float, str]]:
    run = subprocess.run(
        ["perf", "report", "-i", str(data), "--stdio", "-q", "-g", "none", "--no-children",
         "--sort", sort],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return parse_report(run.stdout)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Record one node, print the shares, write <out>/perf_node.json."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--fragments", type=int, default=1_000_000)
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--client", choices=("confluent", "kafka-python"), default="confluent")
    parser.add_argument("--frequency", type=int, default=1999, help="samples per second")
    parser.add_argument("--top", type=int, default=40, help="symbols to print")
    parser.add_argument("--keep", help="keep perf's data file here")
    parser.add_argument(
        "--call-graph", action="store_true", help="record call chains too (perf record -g)"
    )
    args = parser.parse_args(argv)
    if shutil.which("perf") is None:
        raise SystemExit("perf is not installed (apt-get install linux-perf)")
    load_before = load_average()
    workload = load("apache", args.fragments)
    scratch = Path(tempfile.mkdtemp(prefix="perf-node-"))
    data = Path(args.keep) if args.keep else scratch / "perf.data"
    recorders: list[subprocess.Popen[bytes]] = []

    def attach(pids: list[int]) -> None:
        command = ["perf", "record", "-F", str(args.frequency), "-p", str(pids[0]), "-o", str(data)]
        command += ["-g"] if args.call_graph else []
        recorders.append(
            subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        )

    try:
        with bench_cluster() as cluster:
            connection = new_connection(cluster, "perf")
            try:
                produced = produce(workload, connection, args.streams)
                progress(f"[perf] one {args.client} node under perf ({args.frequency} Hz)...")
                run = run_nodes(
                    cluster, produced, workload, 1, scratch,
                    extra=("--kafka-client", args.client), on_started=attach,
                )  # fmt: skip
            finally:
                delete_app(connection)
                for recorder in recorders:  # perf ends with the node; this is for a failed run
                    if recorder.poll() is None:
                        recorder.send_signal(signal.SIGINT)
                    recorder.wait(timeout=120)
        shares = {sort: _report(data, sort) for sort in ("comm", "dso", "dso,sym")}
        if args.call_graph:
            shares["faults"] = _faults(data)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    progress(f"    {run['fragments_per_s']:,.0f} fragments/s, {run['node_cpu_s']} CPU s under perf")
    for title, sort, limit in (("thread", "comm", 10), ("library", "dso", 15)):
        print(f"\nshare of the node's samples by {title}")
        for share, name in shares[sort][:limit]:
            print(f"  {share:6.2f} %  {name}")
    if "faults" in shares:
        print("\nshare of the node's samples in page faults, by thread")
        for share, name in shares["faults"][:10]:
            print(f"  {share:6.2f} %  {name}")
    print(f"\nthe top {args.top} symbols")
    for share, name in shares["dso,sym"][: args.top]:
        print(f"  {share:6.2f} %  {name}")
    rows = [
        {"sort": sort, "share": share, "name": name}
        for sort in shares
        for share, name in shares[sort]
    ]
    extra = {"fragments_per_s": run["fragments_per_s"], "node_cpu_s": run["node_cpu_s"]}
    return save_scenario("perf_node", args, [workload.summary()], load_before, rows, **extra)


if __name__ == "__main__":
    main()
