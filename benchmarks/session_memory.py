"""Bytes per open session of `SessionEngine` with `WebSessions`, grace 0: Python heap and RSS.

    .venv/bin/python -m benchmarks.session_memory [--sessions 200000] [--requests 3]
        [--paths python compiled] [--processor web|declarative]

Issue 24's memory figure: `--sessions` visitors (distinct keys `"<ip>|<agent>"`, the
agents and request fields of tests/data/apache_logs, or the traffic generator's
without it) make `--requests` requests each, 30 s apart, all visits beginning
within one minute; a watermark every 500 fragments and one past the last
request, so that with `grace = 0` every fragment is folded (none held raw) and
no session has ended (the timeout is 30 minutes).  Every record is decoded from
msgpack bytes inside the measured run, as a node does, so the engine keeps
alive exactly what it holds on to.

Two figures per hot path (`--paths`: the `.py` modules, and the mypyc build that
`SESSIONIZER_HOT_PATH=compiled` selects), each from its own fresh process:

- heap: `tracemalloc`'s traced memory after the run (and a full `gc.collect()`)
  minus before it, divided by the open sessions;
- RSS: the resident set (`/proc/self/statm`) after minus before, divided by the
  open sessions (what a native allocation would add counts here).

`--processor declarative` measures `DeclarativeWebSessions` (the same visits declared
as aggregates, sessionizer.declarative) instead of `WebSessions`.

The target (issue 24): at most 800 B per open session on both, on each path.  A
path asked for but not loaded (no build, or a stale one) is reported as such
(`loaded`), never measured under the wrong name.  Writes
<out>/session_memory.json; `run_all` runs it as a scenario.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tracemalloc
from itertools import islice
from pathlib import Path
from typing import Any

import msgpack

from benchmarks.common import print_table, progress, write_json
from benchmarks.tables import markdown
from framework.kernel.compiled import ENV as HOT_PATH_ENV
from framework.kernel.compiled import choice as hot_path_choice
from sessionizer.engine import SessionEngine
from sessionizer.examples import WebSessions
from sessionizer.examples.weblog_declarative import DeclarativeWebSessions

__all__ = ["main", "measure", "section"]

APACHE_LOG = Path(__file__).resolve().parents[1] / "tests" / "data" / "apache_logs"
TARGET_BYTES = 800
WATERMARK_EVERY = 500
T0 = 1_431_857_103_000
STREAM = "bench.stream.0000"
_KEEP: list[object] = []


class NoGrace(WebSessions):
    """`WebSessions` with no grace: every fragment is folded once stream time passes it."""

    grace = 0


class DeclaredNoGrace(DeclarativeWebSessions):
    """`DeclarativeWebSessions` with no grace."""

    grace = 0


PROCESSORS: dict[str, type[WebSessions] | type[DeclarativeWebSessions]] = {
    "web": NoGrace,
    "declarative": DeclaredNoGrace,
}


def _templates() -> list[dict[str, Any]]:
    """Request fields of real visitors, one per distinct session key."""
    if APACHE_LOG.is_file():
        from router.formats import parse_file

        parsed = parse_file(APACHE_LOG, "apache")
    else:
        from router.generator import generate_fragments

        parsed = list(islice(generate_fragments(6_000, seed=42), 20_000))
    return list({item.key: item.fields for item in parsed}.values())


def workload(sessions: int, requests: int) -> list[tuple[bytes, int, bytes] | int]:
    """Records in offset order: (key, event time, msgpack value), or a watermark's time."""
    templates = _templates()
    made: list[tuple[int, int, bytes, bytes]] = []
    for visitor in range(sessions):
        start = T0 + visitor * 60_000 // sessions
        fields = templates[visitor % len(templates)]
        ip = f"10.{visitor // 65536 % 256}.{visitor // 256 % 256}.{visitor % 256}"
        value = msgpack.packb({**fields, "ip": ip}, use_bin_type=True)
        key = f"{ip}|{fields['agent']}".encode()
        made += [(start + step * 30_000, visitor, key, value) for step in range(requests)]
    made.sort()
    # Kept alive: freed, its memory would be reused by the engine and hide from the RSS.
    _KEEP.append(made)
    records: list[tuple[bytes, int, bytes] | int] = []
    high = 0
    for count, (ts, _, key, value) in enumerate(made, start=1):
        records.append((key, ts, value))
        high = max(high, ts)
        if count % WATERMARK_EVERY == 0:
            records.append(high)
    records.append(high + 1)  # past every request: with grace 0 all are folded
    return records


def _feed(records: list[tuple[bytes, int, bytes] | int], processor: str) -> SessionEngine:
    """Run the records through a fresh engine; no session may end."""
    engine = SessionEngine(STREAM, PROCESSORS[processor]())
    for offset, record in enumerate(records):
        if isinstance(record, int):
            produced = engine.process_watermark(offset, record)
        else:
            key, ts, value = record
            produced = engine.process_fragment(offset, key.decode(), ts, msgpack.unpackb(value))
        if produced:
            raise AssertionError("no session may end before the measurement")
    if engine.raw_fragments():
        raise AssertionError("grace 0: no fragment may be held raw")
    return engine


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure(
    records: list[tuple[bytes, int, bytes] | int], method: str, processor: str = "web"
) -> dict[str, Any]:
    """Bytes per open session by `method` ("heap" or "rss") in this process."""
    gc.collect()
    if method == "heap":
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
    else:
        before = _rss_bytes()
    engine = _feed(records, processor)
    gc.collect()
    if method == "heap":
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
    else:
        after = _rss_bytes()
    sessions = engine.counters.open_sessions
    return {
        "loaded": hot_path_choice().path,
        "method": method,
        "open_sessions": sessions,
        "bytes_per_session": (after - before) / sessions,
    }


def _child(args: argparse.Namespace, path: str, method: str) -> dict[str, Any]:
    """Measure in a fresh process, so that one figure's garbage cannot lower the other's."""
    command = [sys.executable, "-m", "benchmarks.session_memory", "--child", method]
    command += ["--sessions", str(args.sessions), "--requests", str(args.requests)]
    command += ["--processor", args.processor]
    env = {**os.environ, HOT_PATH_ENV: path}
    output = subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout
    result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> None:
    """Print bytes per open session (heap and RSS) and write <out>/session_memory.json."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200_000)
    parser.add_argument("--requests", type=int, default=3, help="requests per visit")
    parser.add_argument(
        "--paths", nargs="+", choices=["python", "compiled"], default=["python", "compiled"]
    )
    parser.add_argument("--processor", choices=sorted(PROCESSORS), default="web")
    parser.add_argument("--child", choices=["heap", "rss"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        records = workload(args.sessions, args.requests)
        print(json.dumps(measure(records, args.child, args.processor)))
        return
    rows = []
    for path in args.paths:
        for method in ("heap", "rss"):
            progress(f"measuring {method} on the {path} path: {args.sessions:,} sessions ...")
            row = {"path": path, "processor": args.processor, **_child(args, path, method)}
            row["target"] = TARGET_BYTES
            row["met"] = row["loaded"] == path and row["bytes_per_session"] <= TARGET_BYTES
            rows.append(row)
    print_table(rows, COLUMNS)
    payload = {"benchmark": "session_memory", "params": vars(args), "results": rows}
    progress(f"wrote {write_json('session_memory', payload)}")


COLUMNS = [
    "path",
    "processor",
    "loaded",
    "method",
    "open_sessions",
    "bytes_per_session",
    "target",
    "met",
]


def section(payload: dict[str, Any], cpus: int) -> tuple[str, list[Any]]:
    """RESULTS.md's section: the table."""
    return markdown(payload["results"], COLUMNS), []


if __name__ == "__main__":
    main()
