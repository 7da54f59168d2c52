"""`sessionizer produce` as users run it: the command's lines/s beside what its parts cost alone.

    .venv/bin/python -m benchmarks.produce_command [--copies 30] [--repeat 3]
        [--clients kafka-python confluent]

The real apache log (tests/data/apache_logs, 10,000 lines) is written `--copies`
times into one file.  For each client, `sessionizer produce FILE --format apache
--kafka-client CLIENT` runs on it in a process of its own (its collector as the
command sets it: `framework.node.collector`), to a fresh app's 64 streams; it is
timed from its start to its exit, and its CPU is the child's (rusage).  Beside it,
in this process on the same file: reading the lines (`read_lines`), and reading
and parsing them (`parse_apache`): what the command costs before it sends
anything.  With `--repeat` the runs alternate and the medians count.

Where the time went (py-spy, confluent, 300,000 lines; benchmarks/HOT_PATH.md,
round 20): before, `parse_apache` was 70 % of the command, and its line regex
alone 7.7 of its 15 µs a line.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from benchmarks.common import progress
from benchmarks.measure import bench_cluster, delete_app, load_average, save_scenario
from benchmarks.nodes_vs_bare import new_connection
from benchmarks.tables import markdown, show
from framework.provision import provision_streams
from framework.testing.cli import DATA
from router.errors import MalformedLine
from router.formats_apache import parse_apache
from router.line_input import read_lines

__all__ = ["main", "section"]

CLIENTS = ("kafka-python", "confluent")
STREAMS = 64
COLUMNS = ["what", "lines", "lines_per_s", "cpu_us_per_line", "runs"]


def _reading(path: Path) -> None:
    with path.open("rb") as source:
        for _ in read_lines(source):
            pass


def _parsing(path: Path) -> None:
    rejected = 0  # counted as the command counts them (one line of each copy is cut short)
    with path.open("rb") as source:
        for line in read_lines(source):
            try:
                parse_apache(line.rstrip("\r\n"))
            except MalformedLine:
                rejected += 1


def _in_process(action: Callable[[Path], None], path: Path) -> tuple[float, float]:
    """(seconds, CPU seconds) of `action` in this process."""
    started, cpu = time.perf_counter(), time.process_time()
    action(path)
    return time.perf_counter() - started, time.process_time() - cpu


def _command(cluster: Any, client: str, path: Path) -> tuple[float, float]:
    """(seconds, CPU seconds) of `sessionizer produce` in a child process, to a fresh app."""
    connection = new_connection(cluster, "cmd")
    try:
        provision_streams(connection, STREAMS)
        argv = [sys.executable, "-m", "sessionizer", "produce", str(path), "--format", "apache",
                "--kafka-client", client, "--zk", connection.zk,
                "--bootstrap", connection.bootstrap, "--app", connection.app, "--json"]  # fmt: skip
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise RuntimeError(
                f"sessionizer produce exited {done.returncode}: {done.stderr[-800:]}"
            )
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return seconds, cpu
    finally:
        delete_app(connection)


def _row(what: str, lines: int, runs: list[tuple[float, float]]) -> dict[str, Any]:
    seconds = statistics.median(s for s, _ in runs)
    cpu = statistics.median(c for _, c in runs)
    return {"what": what, "lines": lines, "lines_per_s": lines / seconds,
            "cpu_us_per_line": cpu / lines * 1e6,
            "runs": [round(lines / s) for s, _ in runs]}  # fmt: skip


def section(payload: dict[str, Any], cpus: int) -> tuple[str, list[Any]]:
    """RESULTS.md's section: the command beside its parts, and what parsing is of it."""
    rows = payload["results"]
    text = [
        markdown(
            rows,
            [
                "what",
                "lines",
                ("lines_per_s", "lines/s"),
                ("cpu_us_per_line", "CPU µs/line"),
                ("runs", "lines/s, each run"),
            ],
        ),
        "",
    ]
    parsing = next((r for r in rows if r["what"] == "read_lines + parse_apache"), None)
    for row in rows:
        if row["what"].startswith("sessionizer produce") and parsing is not None:
            share = parsing["cpu_us_per_line"] / row["cpu_us_per_line"]
            text.append(
                f"- {row['what']}: {row['lines_per_s']:,.0f} lines/s, "
                f"{row['cpu_us_per_line']:.2f} µs of CPU a line, of which reading and parsing "
                f"take {parsing['cpu_us_per_line']:.2f} ({share:.0%})."
            )
    return "\n".join(text), []


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the command on each client and its parts alone; print them side by side."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--clients", nargs="+", choices=CLIENTS, default=list(CLIENTS))
    args = parser.parse_args(argv)
    load_before = load_average()
    original = (DATA / "apache_logs").read_bytes()
    lines = original.count(b"\n") * args.copies
    runs: dict[str, list[tuple[float, float]]] = {}
    with (
        tempfile.TemporaryDirectory(prefix="produce-command-") as scratch,
        bench_cluster() as cluster,
    ):
        path = Path(scratch) / "apache_logs"
        path.write_bytes(original * args.copies)
        parts: dict[str, Callable[[], tuple[float, float]]] = {
            "read_lines only": lambda: _in_process(_reading, path),
            "read_lines + parse_apache": lambda: _in_process(_parsing, path),
        }
        for client in args.clients:
            parts[f"sessionizer produce, {client}"] = partial(_command, cluster, client, path)
        for turn in range(args.repeat):
            for what, run in parts.items():
                progress(f"{what} ({turn + 1}/{args.repeat}), {lines:,} lines...")
                runs.setdefault(what, []).append(run())
                progress(f"    {lines / runs[what][-1][0]:,.0f} lines/s")
    rows = [_row(what, lines, results) for what, results in runs.items()]
    show(f"sessionizer produce: {lines:,} apache lines, {STREAMS} streams", rows, COLUMNS)
    # Its input is lines, not a `benchmarks.workload` (whose summaries the report lists).
    return save_scenario("produce_command", args, [], load_before, rows)


if __name__ == "__main__":
    main()
