"""Run every benchmark scenario on one cluster, then write benchmarks/RESULTS.md and its plots.

    .venv/bin/python -m benchmarks.run_all [--quick] [--fragments N] [--only NAME ...]

Scenarios, in order (each is also a command of its own, `python -m
benchmarks.<name>`): producer_workloads, nodes_vs_bare, peers, failover_modes,
scaling.  One local ZooKeeper + Kafka serves them all (or the servers in
SESSIONIZER_ZK / SESSIONIZER_BOOTSTRAP), so every comparison is made on the
same cluster in the same run.  Full sizes: 1,000,000 fragments per workload
(200,000 for failover, 3 repeats); `--quick`: 30,000 (failover 40,000, once),
a few minutes in all.  Each peer gets `--peer-timeout` seconds per workload
(1,500 by default); one stopped there is reported with how many records it
had read and how fast, not with a throughput over the whole input.  A
scenario that fails is reported as failed; the others still run, and
RESULTS.md says which.  RESULTS.md is rewritten after every scenario.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shlex
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks import failover_modes, nodes_vs_bare, peers, producer_workloads, scaling
from benchmarks.common import progress, write_json
from benchmarks.measure import bench_cluster, load_average
from benchmarks.report import SCENARIOS, render

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (
    "sessionizer",
    "kafka-python",
    "kazoo",
    "msgpack",
    "bytewax",
    "quixstreams",
    "confluent-kafka",
    "pyspark",
    "matplotlib",
)


def _plan(args: argparse.Namespace) -> dict[str, tuple[Callable[..., Any], list[str]]]:
    size = str(args.fragments)
    failover = str(args.failover_fragments)
    repeat = "1" if args.quick else "3"
    return {
        "producer_workloads": (producer_workloads.main, ["--fragments", size]),
        "nodes_vs_bare": (nodes_vs_bare.main, ["--fragments", size]),
        "peers": (
            peers.main,
            ["--fragments", size, "--peer-timeout", str(args.peer_timeout)],
        ),
        "failover_modes": (failover_modes.main, ["--fragments", failover, "--repeat", repeat]),
        "scaling": (scaling.main, ["--fragments", size]),
    }


def _machine() -> dict[str, Any]:
    model = "unknown"
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as meminfo:
        memory_kb = int(meminfo.readline().split()[1])
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "memory": f"{memory_kb / 1024 / 1024:.1f} GiB",
        "os": platform.platform(),
        "python": platform.python_version(),
        "java": _first_line(["java", "-version"]),
    }


def _first_line(command: list[str]) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unavailable ({exc})"
    return ((done.stdout or done.stderr).strip().splitlines() or ["?"])[0]


def _versions() -> dict[str, str]:
    versions = {}
    for package in PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "not installed"
    pom = (ROOT / "deploy" / "local" / "pom.xml").read_text()
    for name in ("kafka", "zookeeper", "spark"):
        found = re.search(rf"<{name}\.version>([^<]+)<", pom)
        label = {
            "kafka": "Apache Kafka (server)",
            "zookeeper": "Apache ZooKeeper (server)",
            "spark": "spark-sql-kafka-0-10 connector",
        }[name]
        versions[label] = found.group(1) if found else "?"
    commit = _first_line(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])
    dirty = _first_line(["git", "-C", str(ROOT), "status", "--porcelain"])
    versions["sessionizer commit"] = commit + (
        " (with uncommitted changes)" if dirty != "?" else ""
    )
    return versions


def main(argv: list[str] | None = None) -> int:
    """Run the scenarios; write RESULTS.md; return 1 if any scenario failed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, a few minutes")
    parser.add_argument("--fragments", type=int, help="per workload (default 1M, quick 30k)")
    parser.add_argument("--failover-fragments", type=int, help="default 200k, quick 40k")
    parser.add_argument(
        "--peer-timeout",
        type=float,
        default=1500.0,
        help="seconds each peer may run per workload (default 1500); one stopped at it "
        "is reported with how far it got",
    )
    parser.add_argument("--only", nargs="+", choices=SCENARIOS, default=list(SCENARIOS))
    args = parser.parse_args(argv)
    args.fragments = args.fragments or (30_000 if args.quick else 1_000_000)
    args.failover_fragments = args.failover_fragments or (40_000 if args.quick else 200_000)
    command = "python -m benchmarks.run_all " + shlex.join(sys.argv[1:] if argv is None else argv)
    load = load_average()
    if load >= 1.5:
        progress(f"note: the machine is busy (load average {load:.2f}); numbers will show it")
    started = time.time()
    meta: dict[str, Any] = {
        "command": command.strip(),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "quick": args.quick,
        "machine": _machine(),
        "versions": _versions(),
        "load": {},
        "errors": {},
        "ran": [],
    }
    plan = _plan(args)
    with bench_cluster() as cluster:
        meta["cluster"] = cluster.origin
        for number, name in enumerate(args.only, start=1):
            run, scenario_args = plan[name]
            progress(f"\n=== [{number}/{len(args.only)}] {name} {' '.join(scenario_args)} ===")
            before, began = load_average(), time.time()
            try:
                run(scenario_args)
                meta["ran"].append(name)
            except Exception as exc:  # one failed scenario must not lose the others' results
                meta["errors"][name] = f"{type(exc).__name__}: {exc}"
                progress(f"{name} FAILED:\n{traceback.format_exc()}")
            meta["load"][name] = (before, load_average())
            progress(f"=== {name} took {(time.time() - began) / 60:.1f} min ===")
            # Rendered after every scenario, so an interrupted run still leaves
            # a report of what it finished (the others say "Not run").
            meta["seconds"] = time.time() - started
            write_json("run_all", meta)
            path = render(meta)
    progress(f"\nwrote {path} and its plots in {path.parent / 'plots'}")
    return 1 if meta["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
