"""Per-fragment CPU time of a node's record path by stage, on the apache workload, per hot path.

    .venv/bin/python -m benchmarks.hot_path [--fragments 200000] [--repeats 3]
        [--paths compiled python]

The apache workload of `benchmarks.engine_throughput` (tests/data/apache_logs
repeated, a watermark every 500 fragments), encoded as Kafka records.  Stages,
each timed alone in CPU seconds of this process (`time.process_time`: less
sensitive than wall time to other work on a shared machine), the median of
`--repeats` runs, per hot path (`router.hot_path`, the runs interleaved):

- `decode`: `router.wire.decode_fragment` over every record;
- `engine`: `SessionEngine.process` over the decoded records (tracker, timelines,
  the `WebSessions` hooks, finished sessions);
- `task`: `StreamTask.handle` over the records (decode + engine + outputs): the
  node's per-record path without Kafka;
- `sink encode`: `encode_session` of every finished session (per fragment).

Where the engine's time goes inside (timeline, tracker, hooks) is py-spy's
share of it: benchmarks/HOT_PATH.md.  Writes <out>/hot_path.json.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from benchmarks.common import print_table, progress, write_json
from benchmarks.engine_throughput import STREAM, _parsed, _plan, _wire
from framework.node.task import StreamTask
from router import hot_path, wire
from sessionizer.engine import SessionEngine
from sessionizer.examples import WebSessions
from sessionizer.records import FinishedSession
from sessionizer.sinks import encode_session
from state.record import StreamState

__all__ = ["main"]


def _cpu(run: Callable[[], Any]) -> float:
    started = time.process_time()
    run()
    return time.process_time() - started


def _stages(records: list[Any]) -> dict[str, float]:
    """CPU seconds of each stage over `records`, on the active hot path."""
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
    }


def main(argv: list[str] | None = None) -> None:
    """Print µs per fragment by stage and path; write <out>/hot_path.json."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fragments", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--paths", nargs="+", default=list(hot_path.PATHS), choices=hot_path.PATHS)
    args = parser.parse_args(argv)
    source, parsed = _parsed()
    records = _wire(_plan(parsed, args.fragments))
    fragments = sum(1 for r in records if r.key is not None)
    runs: dict[str, list[dict[str, float]]] = {path: [] for path in args.paths}
    for _ in range(args.repeats):
        for path in args.paths:
            hot_path.select(path)
            runs[path].append(_stages(records))
    rows = []
    for path, results in runs.items():
        row: dict[str, Any] = {"path": path}
        for stage in results[0]:
            row[stage] = statistics.median(r[stage] for r in results) / fragments * 1e6
        row["fragments_per_cpu_s"] = 1e6 / (row["task"] + row["sink encode"])
        rows.append(row)
        progress(f"{path}: task + encode {row['task'] + row['sink encode']:.2f} µs/fragment")
    print_table(rows, ["path", "decode", "engine", "task", "sink encode", "fragments_per_cpu_s"])
    payload = {"benchmark": "hot_path", "source": source, "params": vars(args), "results": rows}
    progress(f"wrote {write_json('hot_path', payload)}")


if __name__ == "__main__":
    main()
