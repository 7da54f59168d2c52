"""Node throughput of two versions of this repository in one run, rounds interleaved.

    .venv/bin/python -m benchmarks.versions [--base d358a0e] [--current HEAD] [--rounds 3]
        [--fragments 300000] [--streams 64] [--clients confluent kafka-python]

"Is the new code slower?" only has an answer when both versions run on the same
machine at the same time of day: load from other work moves a single run by
10-20 % here.  This scenario checks `--base` and `--current` out into temporary git
worktrees (`--current .` measures the working tree as it is),
starts one local ZooKeeper + Kafka, and then runs scenario 2
(`benchmarks.nodes_vs_bare`, one node, the real apache log) with each version's
own code (its benchmark, its node), alternating base, current, base, current, ...
so that drift in the machine's load falls on both.  The table gives each
version's median of the rounds and the current/base ratio of the medians, per
client; every round must be exact against the batch definition.

The default base, d358a0e, is the last commit before the layering restructure
(issue 21), whose acceptance asks for "node throughput no worse than before".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import print_table, progress, write_json
from benchmarks.measure import bench_cluster

__all__ = ["main"]

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BASE = "d358a0e"
# Runs scenario 2's main in whichever tree PYTHONPATH names and writes what it returns.
RUNNER = (
    "import json, sys; from benchmarks.nodes_vs_bare import main; "
    "json.dump(main(sys.argv[2:]), open(sys.argv[1], 'w'), default=str)"
)
METRICS = ("node_fragments_per_s", "node_per_core", "ratio")


def _worktree(revision: str, path: Path) -> Path:
    """A detached git worktree of `revision` at `path` (removed again by the caller)."""
    subprocess.run(
        ["git", "worktree", "add", "--detach", "--quiet", str(path), revision], cwd=ROOT, check=True
    )
    return path


def _run_version(
    tree: Path, out: Path, args: argparse.Namespace, env: dict[str, str]
) -> list[dict[str, Any]]:
    """One round of scenario 2 with the code in `tree`; its result rows."""
    command = [
        sys.executable,
        "-c",
        RUNNER,
        str(out),
        *("--workload", "apache", "--nodes", "1"),
        *("--fragments", str(args.fragments), "--streams", str(args.streams)),
        *("--clients", *args.clients),
    ]
    subprocess.run(command, cwd=tree, env={**env, "PYTHONPATH": str(tree)}, check=True)
    rows: list[dict[str, Any]] = json.loads(out.read_text())["results"]
    inexact = [row for row in rows if not row.get("node_exact")]
    if inexact:
        raise RuntimeError(
            f"a round in {tree} was not exact against the batch definition: {inexact}"
        )
    return rows


def _table(
    results: dict[str, list[list[dict[str, Any]]]], clients: list[str]
) -> list[dict[str, Any]]:
    """Per client and metric: each version's median over the rounds, and current/base."""
    table = []
    for client in clients:
        for metric in METRICS:
            medians = {
                version: statistics.median(
                    r[metric] for rows in rounds for r in rows if r["client"] == client
                )
                for version, rounds in results.items()
            }
            table.append(
                {
                    "client": client,
                    "metric": metric,
                    "base": round(medians["base"], 3),
                    "current": round(medians["current"], 3),
                    "current_over_base": round(medians["current"] / medians["base"], 3),
                }
            )
    return table


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run both versions interleaved; print the medians side by side; write out/versions.json."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default=DEFAULT_BASE, help="git revision to compare against")
    parser.add_argument("--current", default="HEAD", help="git revision, or . for this tree")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fragments", type=int, default=300_000)
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--clients", nargs="+", default=["confluent", "kafka-python"])
    args = parser.parse_args(argv)
    results: dict[str, list[list[dict[str, Any]]]] = {"base": [], "current": []}
    with tempfile.TemporaryDirectory(prefix="sessionizer-versions-") as scratch:
        trees = {"base": _worktree(args.base, Path(scratch) / "base")}
        trees["current"] = (
            ROOT if args.current == "." else _worktree(args.current, Path(scratch) / "current")
        )
        try:
            with bench_cluster() as cluster:
                env = {
                    **os.environ,
                    "SESSIONIZER_ZK": cluster.zk,
                    "SESSIONIZER_BOOTSTRAP": cluster.bootstrap,
                }
                for round_number in range(args.rounds):
                    order = list(trees.items())
                    for version, tree in order if round_number % 2 == 0 else order[::-1]:
                        progress(f"round {round_number + 1}/{args.rounds}: {version} ({tree})")
                        out = Path(scratch) / f"{version}-{round_number}.json"
                        results[version].append(_run_version(tree, out, args, env))
        finally:
            for tree in trees.values():
                if tree != ROOT:
                    subprocess.run(
                        ["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False
                    )
    table = _table(results, args.clients)
    title = f"node throughput, {args.base} (base) vs {args.current} (current)"
    print(f"{title}: medians of {args.rounds} rounds")
    print_table(table, ["client", "metric", "base", "current", "current_over_base"])
    payload = {"benchmark": "versions", "params": vars(args), "results": table, "rounds": results}
    progress(f"results written to {write_json('versions', payload)}")
    return payload


if __name__ == "__main__":
    main()
