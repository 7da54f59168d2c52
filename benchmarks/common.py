"""What every benchmark shares: servers for the run, a table printer, JSON results."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from framework.cluster import LocalCluster
from framework.logging import configure_logging

__all__ = [
    "OUT",
    "OUT_ENV",
    "Payload",
    "Servers",
    "machine",
    "out_dir",
    "print_table",
    "progress",
    "servers",
    "tree_commit",
    "write_json",
]

OUT = Path(__file__).resolve().parent / "out"
OUT_ENV = "SESSIONIZER_BENCH_OUT"
Payload = dict[str, Any]
"""A scenario's JSON as written to the out directory (`results`, `params`, `machine`...)."""


def out_dir() -> Path:
    """Where results go: `$SESSIONIZER_BENCH_OUT`, else benchmarks/out (the committed ones)."""
    # An environment variable, so scenario subprocesses and `run_all --out-dir` agree.
    explicit = os.environ.get(OUT_ENV)
    return Path(explicit) if explicit else OUT


@dataclass(frozen=True)
class Servers:
    """Connection strings for one benchmark run."""

    zk: str
    bootstrap: str


@contextmanager
def servers(brokers: int = 1) -> Iterator[Servers]:
    """`SESSIONIZER_ZK`/`SESSIONIZER_BOOTSTRAP` when set, else a fresh `LocalCluster`."""
    # Benchmarks print tables on stdout; logs go to stderr, and only what matters.
    configure_logging("warning")
    zk, bootstrap = os.environ.get("SESSIONIZER_ZK"), os.environ.get("SESSIONIZER_BOOTSTRAP")
    if zk and bootstrap:
        yield Servers(zk, bootstrap)
        return
    progress("starting a local ZooKeeper + Kafka for this run...")
    with (
        tempfile.TemporaryDirectory(prefix="sessionizer-bench-") as directory,
        LocalCluster(directory, brokers=brokers) as cluster,  # type: ignore[arg-type]
    ):
        yield Servers(cluster.zk_connect, cluster.bootstrap)


def progress(text: str) -> None:
    """One progress line on stderr."""
    print(text, file=sys.stderr, flush=True)


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
    }


def tree_commit(tree: Path) -> str:
    """The checkout's short commit, and whether it has uncommitted changes (else git's message)."""

    def first_line(*args: str) -> str:
        try:
            done = subprocess.run(
                ["git", "-C", str(tree), *args],
                capture_output=True,
                text=True,
                check=False,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired):
            return "?"
        return ((done.stdout or done.stderr).strip().splitlines() or ["?"])[0]

    commit = first_line("rev-parse", "--short", "HEAD")
    dirty = first_line("status", "--porcelain") != "?"
    return commit + (" (with uncommitted changes)" if dirty else "")


def print_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
    """Print rows as an aligned plain-text table."""
    cells = [[_fmt(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
    for row in cells:
        print("  ".join(v.rjust(w) for v, w in zip(row, widths, strict=True)))


def write_json(name: str, payload: dict[str, Any]) -> Path:
    """Write `<out_dir()>/<name>.json`; return its path."""
    directory = out_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    path.write_text(json.dumps({"machine": machine(), **payload}, indent=2) + "\n")
    return path


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return "-" if value is None else str(value)
