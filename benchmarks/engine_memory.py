"""Memory per open session of `SessionEngine` with `WebSessions`: this tree against a git ref.

    .venv/bin/python -m benchmarks.engine_memory [--baseline HEAD|none] [--visitors 2000]
        [--minutes 20] [--every 30]

Input: `--visitors` visitors, each making one request every `--every` seconds for
`--minutes` minutes (their visits start within one minute of each other), the
requests' fields taken from tests/data/apache_logs (or the traffic generator
without it), a watermark every 500 fragments as the producer writes them.  Every
record is decoded from msgpack bytes inside the measured loop, as a node does, so
the engine keeps alive exactly what it holds on to.  Measured when every visit
has just made its last request (all sessions open, none ended: the timeout is 30
minutes).

Method: `tracemalloc`, the traced Python heap after the loop (and a full
`gc.collect()`) minus before it, divided by the open sessions.  It counts what
the engine holds for them: the session keys, the engine's and the tracker's
structures, the processor's session objects, and the fragments held raw.  Rows:

- the engine of `--baseline` (default HEAD; `none` leaves the row out), loaded
  from `git archive` into a temporary directory and imported side by side in
  this process;
- this tree's engine, with `WebSessions`' 2-minute grace;
- this tree's engine with `grace = 0` (no fragment is held raw): the engine's
  bookkeeping plus the processor's state;
- the processor's state alone (`open` and `update` over the same requests, kept
  in a list), for reference.

The target (issue 16): at most 600 B per open session plus the fragments held
raw within the grace, i.e. the grace-0 row at most 600 B.  Writes
<out>/engine_memory.json.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import importlib
import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack

from benchmarks.common import print_table, progress, write_json
from framework import StreamProcessor
from sessionizer import FinishedSession, Fragment, SessionEngine, Watermark
from sessionizer.examples import WebSessions

__all__ = ["Engines", "baseline_engines", "current_engines", "main"]

REPO = Path(__file__).resolve().parents[1]
APACHE_LOG = REPO / "tests" / "data" / "apache_logs"
_PACKAGES = ("balancer", "framework", "router", "sessionizer", "state")
WATERMARK_EVERY = 500
T0 = 1_431_857_103_000
STREAM = "bench.stream.0000"


@dataclass(frozen=True)
class Engines:
    """One version of the engine, the record types it takes, and the node's `StreamTask`."""

    label: str
    engine: type[Any]
    fragment: type[Any]
    watermark: type[Any]
    session: type[Any]
    task: type[Any]


def current_engines() -> Engines:
    """This tree's engine."""
    from framework.node.task import StreamTask

    return Engines("this tree", SessionEngine, Fragment, Watermark, FinishedSession, StreamTask)


def baseline_engines(ref: str) -> Engines:
    """The engine of git `ref`, imported beside this tree's (its modules under their own names).

    `git archive` unpacks the packages into a temporary directory; they are imported
    with `sys.modules` emptied of the project's packages, which are then put back.
    """
    directory = Path(tempfile.mkdtemp(prefix="engine-baseline-"))
    atexit.register(shutil.rmtree, directory, True)  # imported already; kept for tracebacks
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", ref, *_PACKAGES],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(directory, filter="data")
    saved = {name: module for name, module in sys.modules.items() if _ours(name)}
    for name in saved:
        del sys.modules[name]
    sys.path.insert(0, str(directory))
    try:
        engine = importlib.import_module("sessionizer.engine")
        records = importlib.import_module("sessionizer.records")
        task = importlib.import_module("framework.node.task")
        return Engines(
            f"{ref} (git)",
            engine.SessionEngine,
            records.Fragment,
            records.Watermark,
            records.FinishedSession,
            task.StreamTask,
        )
    finally:
        sys.path.remove(str(directory))
        for name in [name for name in sys.modules if _ours(name)]:
            del sys.modules[name]
        sys.modules.update(saved)


def _ours(module: str) -> bool:
    return module.split(".")[0] in _PACKAGES


@dataclass(frozen=True)
class Workload:
    """Encoded requests in offset order: (key bytes, event time, value bytes); None = watermark."""

    records: list[tuple[bytes, int, bytes] | None]
    visitors: int
    fragments: int
    raw_at_end: int
    """Fragments within the grace (2 minutes) of stream time at the end."""


def workload(visitors: int, minutes: int, every_s: int) -> Workload:
    """Build the requests of `visitors` long visits, interleaved in event-time order."""
    templates = _templates()
    requests: list[tuple[int, int, bytes, bytes]] = []
    for visitor in range(visitors):
        start = T0 + visitor * 60_000 // visitors  # all visits begin within a minute
        fields = templates[visitor % len(templates)]
        ip = f"10.{visitor // 256 % 256}.{visitor % 256}.1"
        value = msgpack.packb({**fields, "ip": ip}, use_bin_type=True)
        key = f"{ip}|{fields['agent']}".encode()
        for step in range(minutes * 60 // every_s + 1):
            requests.append((start + step * every_s * 1_000, visitor, key, value))
    requests.sort()
    records: list[tuple[bytes, int, bytes] | None] = []
    for count, (ts, _, key, value) in enumerate(requests, start=1):
        records.append((key, ts, value))
        if count % WATERMARK_EVERY == 0:
            records.append(None)
    end = requests[-1][0]
    raw = sum(1 for ts, _, _, _ in requests if ts >= end - WebSessions.grace * 1_000)
    return Workload(records, visitors, len(requests), raw)


def _templates() -> list[dict[str, Any]]:
    """Request fields of real visitors, one per distinct session key."""
    if APACHE_LOG.is_file():
        from router.formats import parse_file

        parsed = parse_file(APACHE_LOG, "apache")
    else:
        from itertools import islice

        from router.generator import generate_fragments

        parsed = list(islice(generate_fragments(6_000, seed=42), 20_000))
    by_key = {item.key: item.fields for item in parsed}
    return list(by_key.values())


def _feed(engines: Engines, processor: StreamProcessor, work: Workload) -> tuple[Any, int]:
    """Run the workload through a fresh engine; return it and its open sessions."""
    engine = engines.engine(STREAM, processor)
    high = 0
    for offset, record in enumerate(work.records):
        if record is None:
            # By keyword: the field order differs between versions of the record type.
            engine.process(engines.watermark(offset=offset, timestamp_ms=high))
            continue
        key, ts, value = record
        high = max(high, ts)
        fragment = engines.fragment(offset, key.decode(), ts, msgpack.unpackb(value))
        for _ in engine.process(fragment):
            raise AssertionError("no session may end before the measurement")
    return engine, engine.counters.open_sessions


def _traced(build: Callable[[], tuple[Any, int]]) -> tuple[int, int]:
    """Return (bytes the built object keeps alive, its open sessions)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept, sessions = build()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del kept
    return after - before, sessions


class _NoGrace(WebSessions):
    grace = 0


def _states(work: Workload) -> tuple[list[Any], int]:
    """The processor's session objects alone, after the same requests."""
    processor = WebSessions()
    states: dict[bytes, Any] = {}
    for record in work.records:
        if record is not None:
            key, _, value = record
            fields = msgpack.unpackb(value)
            if key not in states:
                states[key] = processor.open(key.decode(), fields)
            processor.update(states[key], fields)
    return list(states.values()), len(states)


def measure(work: Workload, baseline: Engines | None) -> Iterator[dict[str, Any]]:
    """Yield one row per case (this tree, grace 0, state alone; the baseline first if given)."""
    mine = current_engines()
    cases: list[tuple[str, Callable[[], tuple[Any, int]], int]] = [
        (mine.label, lambda: _feed(mine, WebSessions(), work), work.raw_at_end),
        (f"{mine.label}, grace 0", lambda: _feed(mine, _NoGrace(), work), 0),
        ("WebSessions state alone", lambda: _states(work), 0),
    ]
    if baseline is not None:
        cases.insert(
            0, (baseline.label, lambda: _feed(baseline, WebSessions(), work), work.fragments)
        )
    for name, build, raw in cases:
        progress(f"measuring {name} ...")
        kept, sessions = _traced(build)
        yield {
            "engine": name,
            "open_sessions": sessions,
            "fragments_per_session": work.fragments / work.visitors,
            "raw_per_session": raw / work.visitors,
            "bytes_per_session": kept / sessions,
        }


def _summary(rows: list[dict[str, Any]], work: Workload) -> dict[str, float]:
    """Split this tree's bytes per open session into what holds them."""
    grace, no_grace, state = (row["bytes_per_session"] for row in rows[-3:])
    keys = {record[0] for record in work.records if record is not None}
    key = sum(sys.getsizeof(k.decode()) for k in keys) / len(keys)
    raw = rows[-3]["raw_per_session"]
    return {
        "per raw fragment (inside the grace)": (grace - no_grace) / raw if raw else 0.0,
        "per open session, without raw fragments": no_grace,
        "  of which the processor's session object": state,
        "  of which the session key (str)": key,
        "  of which the engine's bookkeeping": no_grace - state - key,
    }


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark, print the table and write benchmarks/out/engine_memory.json."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--baseline", default="HEAD", help="git ref of the engine to compare, or none"
    )
    parser.add_argument("--visitors", type=int, default=2_000)
    parser.add_argument("--minutes", type=int, default=20, help="length of every visit")
    parser.add_argument("--every", type=int, default=30, help="seconds between requests")
    args = parser.parse_args(argv)
    baseline = None if args.baseline == "none" else baseline_engines(args.baseline)
    work = workload(args.visitors, args.minutes, args.every)
    progress(f"{work.visitors:,} visits of {args.minutes} min, {work.fragments:,} requests")
    rows = list(measure(work, baseline))
    columns = ["engine", "open_sessions", "fragments_per_session", "raw_per_session"]
    print_table(rows, [*columns, "bytes_per_session"])
    summary = _summary(rows, work)
    for name, value in summary.items():
        print(f"{name}: {value:,.0f} B")
    payload = {
        "benchmark": "engine_memory",
        "params": vars(args),
        "method": "tracemalloc: traced heap kept after the run, divided by open sessions",
        "baseline": args.baseline,
        "visitors": args.visitors,
        "minutes": args.minutes,
        "every_s": args.every,
        "results": rows,
        "summary_bytes": summary,
    }
    progress(f"wrote {write_json('engine_memory', payload)}")


if __name__ == "__main__":
    main()
