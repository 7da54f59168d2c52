"""Per-fragment CPU time of a node's record path by stage, on the apache workload, per hot path.

    .venv/bin/python -m benchmarks.hot_path [--fragments 200000] [--repeats 3]
        [--paths compiled python]

The apache workload of `benchmarks.engine_throughput` (tests/data/apache_logs
repeated, a watermark every 500 fragments), encoded as Kafka records.  Stages,
each timed alone in CPU seconds of its process (`time.process_time`: less
sensitive than wall time to other work on a shared machine), the least of
`--repeats` runs (other work on the machine only adds to it; the median of task +
encode is printed too), per hot path:

- `decode`: `router.wire.decode_fragment` over every record;
- `engine`: `SessionEngine.process` over the decoded records (tracker, timelines,
  the `WebSessions` hooks, finished sessions);
- `task`: `StreamTask.handle` over the records (decode + engine + outputs): the
  node's per-record path without Kafka;
- `sink encode`: `encode_session` of every finished session (per fragment).

A process runs one hot path (`framework.kernel.compiled`, chosen by
`SESSIONIZER_HOT_PATH` at start), so each path is a child process of this one
(`--child`), started once; the parent asks them for a round in turn, so the
rounds of both paths are interleaved and machine noise hits them alike.  Where the
time goes inside the engine is py-spy's share of it: benchmarks/HOT_PATH.md.
Writes <out>/hot_path.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from benchmarks.common import print_table, progress, write_json
from benchmarks.engine_throughput import STREAM, _parsed, _plan, _wire
from framework.kernel import compiled

__all__ = ["main"]


def _cpu(run: Callable[[], Any]) -> float:
    started = time.process_time()
    run()
    return time.process_time() - started


def _stages(records: list[Any]) -> dict[str, float]:
    """CPU seconds of each stage over `records`, on this process's hot path."""
    from framework.node.task import StreamTask
    from router import wire
    from sessionizer.engine import SessionEngine
    from sessionizer.examples import WebSessions
    from sessionizer.records import FinishedSession
    from sessionizer.sinks import encode_session
    from state.record import StreamState

    decoded: list[Any] = []

    def decode() -> None:
        decoded.clear()
        for r in records:
            decoded.append(wire.decode_fragment(r.key, r.value, r.headers, r.timestamp, r.offset))

    sessions: list[FinishedSession] = []

    def engine() -> None:
        sessions.clear()
        process = SessionEngine(STREAM, WebSessions()).process
        for item in decoded:
            sessions.extend(o for o in process(item) if isinstance(o, FinishedSession))

    def task() -> None:
        handle = StreamTask.resume(WebSessions(), StreamState.initial(STREAM)).handle
        for record in records:
            handle(record)

    def encode() -> None:
        for session in sessions:
            encode_session(session)

    return {
        "decode": _cpu(decode),
        "engine": _cpu(engine),
        "task": _cpu(task),
        "sink encode": _cpu(encode),
        "sessions": float(len(sessions)),
    }


def _child(fragments: int) -> None:
    """Build the records, then time one round per line read on stdin (a JSON line each)."""
    _, parsed = _parsed()
    records = _wire(_plan(parsed, fragments))
    chosen = compiled.choice()
    print(json.dumps({"path": chosen.path, "reason": chosen.reason}), flush=True)
    for _ in sys.stdin:
        print(json.dumps(_stages(records)), flush=True)


class _Child:
    def __init__(self, path: str, fragments: int) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.hot_path", "--child", "--fragments", str(fragments)],
            env={**os.environ, compiled.ENV: path},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.hello = self._line()

    def _line(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"a child ended early (exit code {self.process.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def round(self) -> dict[str, float]:
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()
        return self._line()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


def main(argv: list[str] | None = None) -> None:
    """Print µs per fragment by stage and path; write <out>/hot_path.json."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fragments", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--paths", nargs="+", default=list(compiled.PATHS), choices=compiled.PATHS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.fragments)
        return
    source, parsed = _parsed()
    fragments = sum(1 for r in _wire(_plan(parsed, args.fragments)) if r.key is not None)
    children = {path: _Child(path, args.fragments) for path in args.paths}
    for path, child in children.items():
        progress(f"{path}: runs {child.hello['path']} ({child.hello['reason']})")
    runs: dict[str, list[dict[str, float]]] = {path: [] for path in args.paths}
    for _ in range(args.repeats):
        for path, child in children.items():
            runs[path].append(child.round())
    for child in children.values():
        child.close()
    rows = []
    for path, results in runs.items():
        row: dict[str, Any] = {"path": path, "runs": children[path].hello["path"]}
        for stage in ("decode", "engine", "task", "sink encode"):
            row[stage] = min(r[stage] for r in results) / fragments * 1e6
        row["sessions"] = int(results[0]["sessions"])
        row["fragments_per_cpu_s"] = 1e6 / (row["task"] + row["sink encode"])
        row["median_fragments_per_cpu_s"] = statistics.median(
            fragments / (r["task"] + r["sink encode"]) for r in results
        )
        rows.append(row)
        progress(f"{path}: task + encode {row['task'] + row['sink encode']:.2f} µs/fragment")
    columns = ["path", "runs", "decode", "engine", "task", "sink encode", "sessions"]
    print_table(rows, [*columns, "fragments_per_cpu_s", "median_fragments_per_cpu_s"])
    payload = {
        "benchmark": "hot_path",
        "source": source,
        "params": vars(args),
        "results": rows,
        "runs": runs,
    }
    progress(f"wrote {write_json('hot_path', payload)}")


if __name__ == "__main__":
    main()
