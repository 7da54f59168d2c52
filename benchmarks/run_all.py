"""Run every benchmark scenario on one cluster, then write benchmarks/RESULTS.md and its plots.

    .venv/bin/python -m benchmarks.run_all [--quick] [--fragments N] [--only NAME ...]
        [--output RESULTS.md] [--out-dir DIR] [--append]

Scenarios, in order (each is also a command of its own, `python -m
benchmarks.<name>`): producer_workloads, nodes_vs_bare, broker_ceiling,
profile_node, engine_memory, zookeeper_commits, peers, failover_modes,
scaling, skew, delivery_modes, resize, session_memory, produce_command.  Both Kafka
transports (confluent-kafka and kafka-python) run side by side wherever a node or a
producer does.  One local
ZooKeeper + Kafka serves them all (or the servers in SESSIONIZER_ZK /
SESSIONIZER_BOOTSTRAP), so every comparison is made on the same cluster in the same run.

Full sizes (`make bench`): 1,000,000 fragments per workload (the profile
300,000, failover 200,000 with 3 repeats; nodes against bare readers and the peers
medians of 3 runs, the producer of 5), every workload, 1/2/4 nodes, every
peer, failover with and without handover, skew from 400,000 fragments at
1,000/s, the live resize (8 -> 12 streams, 2 -> 3 nodes) on 300,000 fragments at
1,500/s, `sessionizer produce` on the apache log thirty times (300,000 lines, medians
of 3).  `--quick` (`make bench-quick`, at most 15 minutes on an idle 2-core
machine): 30,000 fragments, the apache workload and one node where the targets
only need that, Spark as the only peer (its per-core figure is a target), the
scaling grid cut to 16 and 288 streams on 1 and 2 nodes, failover once per
case, skew from 200,000 fragments at 800/s, delivery modes on 50,000 fragments
with confluent-kafka only (about 3 minutes), the resize on 30,000 fragments (about
a minute), `sessionizer produce` on the log three times.  Each peer gets
`--peer-timeout` seconds per workload (1,500 by default).  A scenario that
fails is reported as failed; the others still run.  The report is rewritten
after every scenario, and at the end issue 24's targets table is printed
(the report also carries issue 16's): each figure beside its value before the
work and its target.  `--append` continues the run recorded in the output
directory (more scenarios, or one again) and the report's header says so.

`--out-dir` puts the JSON results somewhere else than benchmarks/out (it sets
SESSIONIZER_BENCH_OUT for every scenario), `--output` the report (its plots go
to plots/ beside it): a run on a busy or shared machine need not touch the
committed results.
"""

from __future__ import annotations

import argparse
import json
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

from benchmarks import (
    broker_ceiling,
    delivery_modes,
    engine_memory,
    failover_modes,
    nodes_vs_bare,
    peers,
    produce_command,
    producer_workloads,
    profile_node,
    quix_venv,
    resize,
    scaling,
    session_memory,
    skew,
    zookeeper_commits,
)
from benchmarks.common import OUT_ENV, out_dir, progress, tree_commit, write_json
from benchmarks.measure import bench_cluster, load_average
from benchmarks.report import RESULTS, SCENARIOS, load_payloads, render
from benchmarks.tables import show
from benchmarks.targets import COLUMNS as TARGET_COLUMNS
from benchmarks.targets import figures
from framework.kernel import compiled

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (
    "sessionizer",
    "kafka-python",
    "kazoo",
    "msgpack",
    "bytewax",
    "confluent-kafka",
    "pyspark",
    "matplotlib",
)


def _plan(args: argparse.Namespace) -> dict[str, tuple[Callable[..., Any], list[str]]]:
    size = ["--fragments", str(args.fragments)]
    failover = ["--fragments", str(args.failover_fragments)]
    peer_timeout = ["--peer-timeout", str(args.peer_timeout)]
    if args.quick:
        return {
            "producer_workloads": (producer_workloads.main, size),
            "nodes_vs_bare": (nodes_vs_bare.main, [*size, "--workload", "apache", "--nodes", "1"]),
            "broker_ceiling": (broker_ceiling.main, size),
            "profile_node": (profile_node.main, size),
            "engine_memory": (engine_memory.main, ["--baseline", "none", "--visitors", "500"]),
            "zookeeper_commits": (
                zookeeper_commits.main,
                ["--rounds", "3", "--capacity-seconds", "2"],
            ),
            "peers": (
                peers.main,
                [*size, *peer_timeout, "--workload", "apache", "--peers", "spark", "--nodes", "1"],
            ),
            "failover_modes": (failover_modes.main, [*failover, "--repeat", "1"]),
            "scaling": (scaling.main, [*size, "--streams", "16", "288", "--nodes", "1", "2"]),
            "skew": (skew.main, ["--fragments", "200000", "--rate", "800"]),
            "delivery_modes": (
                delivery_modes.main,
                ["--fragments", "50000", "--clients", "confluent", "--latency-fragments", "3000"],
            ),
            "resize": (resize.main, ["--fragments", "30000"]),
            "session_memory": (session_memory.main, ["--sessions", "50000"]),
            "produce_command": (produce_command.main, ["--copies", "3"]),
        }
    profile = ["--fragments", str(min(args.fragments, 300_000))]
    return {
        # Medians of five alternating runs: one run moves the ratios by +-15 % here, as much
        # as the margin (benchmarks/HOT_PATH.md, round 6), and on confluent one run's
        # wall rate by up to 25 % (round 21).
        "producer_workloads": (producer_workloads.main, [*size, "--repeat", "5"]),
        # Medians of three runs too, as issue 24 quotes its figures: a node's time ends at a
        # once-a-second commit, which moves one run's rate by a tenth (HOT_PATH.md, round 15).
        "nodes_vs_bare": (nodes_vs_bare.main, [*size, "--repeat", "3"]),
        "broker_ceiling": (broker_ceiling.main, size),
        "profile_node": (profile_node.main, profile),
        "engine_memory": (engine_memory.main, ["--baseline", "none"]),
        "zookeeper_commits": (zookeeper_commits.main, []),
        # Issue 24's per-CPU ratios come from here: medians of three, as it quotes its own.
        "peers": (peers.main, [*size, *peer_timeout, "--repeat", "3"]),
        "failover_modes": (failover_modes.main, [*failover, "--repeat", "3"]),
        "scaling": (scaling.main, size),
        "skew": (skew.main, []),
        "delivery_modes": (delivery_modes.main, size),
        "resize": (resize.main, ["--fragments", str(min(args.fragments, 300_000))]),
        "session_memory": (session_memory.main, []),
        "produce_command": (produce_command.main, ["--copies", "30", "--repeat", "3"]),
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
        # The nodes' path: they inherit this process's environment and build.
        "hot path (SESSIONIZER_HOT_PATH)": _hot_path(),
    }


def _hot_path() -> str:
    chosen = compiled.choice()
    return f"{chosen.path} (asked: {chosen.requested}; {chosen.reason})"


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
    # Quix Streams runs from a venv of its own (benchmarks.quix_venv).
    versions["quixstreams"] = quix_venv.version() or "not installed"
    pom = (ROOT / "deploy" / "local" / "pom.xml").read_text()
    for name in ("kafka", "zookeeper", "spark"):
        found = re.search(rf"<{name}\.version>([^<]+)<", pom)
        label = {
            "kafka": "Apache Kafka (server)",
            "zookeeper": "Apache ZooKeeper (server)",
            "spark": "spark-sql-kafka-0-10 connector",
        }[name]
        versions[label] = found.group(1) if found else "?"
    jvm = (ROOT / "benchmarks" / "jvm" / "pom.xml").read_text()
    for name, label in (("kafka", "Kafka Streams (peer)"), ("flink", "Flink (peer)")):
        found = re.search(rf"<{name}\.version>([^<]+)<", jvm)
        versions[label] = found.group(1) if found else "?"
    versions["sessionizer commit"] = tree_commit(ROOT)
    return versions


def main(argv: list[str] | None = None) -> int:
    """Run the scenarios; write RESULTS.md; return 1 if any scenario failed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, at most 15 minutes")
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
    parser.add_argument("--output", type=Path, default=RESULTS, help="the report to write")
    parser.add_argument("--out-dir", type=Path, help="JSON results (default benchmarks/out)")
    parser.add_argument(
        "--append",
        action="store_true",
        help="continue the run whose results are in the output directory: its scenarios stay "
        "in the report, and the report says which ran later",
    )
    args = parser.parse_args(argv)
    if args.out_dir is not None:
        os.environ[OUT_ENV] = str(args.out_dir.resolve())
    args.fragments = args.fragments or (30_000 if args.quick else 1_000_000)
    args.failover_fragments = args.failover_fragments or (40_000 if args.quick else 200_000)
    command = "python -m benchmarks.run_all " + shlex.join(sys.argv[1:] if argv is None else argv)
    load = load_average()
    if load >= 1.5:
        progress(f"note: the machine is busy (load average {load:.2f}); numbers will show it")
    started = time.time()
    meta = _continued(command.strip()) if args.append else _fresh(command.strip(), args.quick)
    plan = _plan(args)
    with bench_cluster() as cluster:
        meta.setdefault("cluster", cluster.origin)
        path = _run_scenarios(meta, plan, args, started)
    show(
        f"issue 24 targets, this run ({(time.time() - started) / 60:.1f} min)",
        figures(load_payloads()),
        TARGET_COLUMNS,
    )
    progress(f"\nwrote {path} and its plots in {path.parent / 'plots'}")
    return 1 if meta["errors"] else 0


def _fresh(command: str, quick: bool) -> dict[str, Any]:
    """The run's record: what ran, where, on what."""
    return {
        "command": command,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "quick": quick,
        "machine": _machine(),
        "versions": _versions(),
        "load": {},
        "errors": {},
        "ran": [],
        "out_dir": str(out_dir()),
        "seconds": 0.0,
    }


def _continued(command: str) -> dict[str, Any]:
    """The record of the run in the output directory, continued by `command`."""
    path = out_dir() / "run_all.json"
    if not path.exists():
        raise SystemExit(f"--append: no run to continue in {out_dir()} (no run_all.json)")
    meta: dict[str, Any] = json.loads(path.read_text())
    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    meta.setdefault("continued", []).append({"command": command, "date": date})
    return meta


def _run_scenarios(
    meta: dict[str, Any],
    plan: dict[str, tuple[Callable[..., Any], list[str]]],
    args: argparse.Namespace,
    started: float,
) -> Path:
    """Each scenario in turn; the report rewritten after each. Returns the report's path."""
    path: Path = args.output
    earlier = float(meta.get("seconds", 0.0))
    for number, name in enumerate(args.only, start=1):
        run, scenario_args = plan[name]
        progress(f"\n=== [{number}/{len(args.only)}] {name} {' '.join(scenario_args)} ===")
        before, began = load_average(), time.time()
        try:
            run(scenario_args)
            meta["errors"].pop(name, None)
            if name not in meta["ran"]:
                meta["ran"].append(name)
        except Exception as exc:  # one failed scenario must not lose the others' results
            meta["errors"][name] = f"{type(exc).__name__}: {exc}"
            progress(f"{name} FAILED:\n{traceback.format_exc()}")
        meta["load"][name] = (before, load_average())
        progress(f"=== {name} took {(time.time() - began) / 60:.1f} min ===")
        # Rendered after every scenario, so an interrupted run still leaves
        # a report of what it finished (the others say "Not run").
        meta["seconds"] = earlier + time.time() - started
        write_json("run_all", meta)
        path = render(meta, args.output)
    return path


if __name__ == "__main__":
    raise SystemExit(main())
