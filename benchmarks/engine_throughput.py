"""Session-engine throughput alone: fragments/s through `SessionEngine`, no Kafka, no ZooKeeper.

    .venv/bin/python -m benchmarks.engine_throughput [--fragments 200000] [--repeats 5]
        [--baseline HEAD]

Input: tests/data/apache_logs parsed with the router's parser (read in place),
repeated with event times shifted a day per copy until `--fragments` are
reached, with a watermark every 500 fragments and an end-of-input watermark, as
the producer writes them.  Without the log (a user's clone), the traffic
generator's fragments are used instead; the JSON says which.  Parsing and record
building are not timed.  Rows:

- `WebSessions`: the built-in example processor (the number that matters);
- `WebSessions + commits`: plus `snapshot()` and `encode()` every 1,000 records;
- `no-op hooks`: a processor whose hooks do nothing (the engine's own cost);
- `WebSessions, wire records`: the node's path from a Kafka record to the engine,
  `StreamTask.handle` over the records' encoded bytes (decoding included);
- `DeclarativeWebSessions` (and its wire records): the same sessions declared as
  aggregates (`sessionizer.declarative`), folded without Python hooks.

`--baseline REF` runs every row with the engine (and `StreamTask`) of git `REF`
too, imported side by side in this process (`benchmarks.engine_memory`), the runs
interleaved so that machine noise hits both alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable, Mapping
from itertools import islice
from pathlib import Path
from typing import Any

from benchmarks.common import print_table, progress, write_json
from benchmarks.engine_memory import Engines, baseline_engines, current_engines
from framework import StreamProcessor
from framework.kernel.records import StreamRecord
from framework.kernel.watermark import Watermark
from router.formats import parse_file
from router.fragment import ParsedFragment
from router.generator import generate_fragments
from router.wire import encode_fragment, encode_watermark
from sessionizer.examples import WebSessions
from sessionizer.examples.weblog_declarative import DeclarativeWebSessions
from state.record import StreamState

__all__ = ["main"]

APACHE_LOG = Path(__file__).resolve().parents[1] / "tests" / "data" / "apache_logs"
WATERMARK_EVERY = 500
COMMIT_EVERY = 1_000
STREAM = "bench.stream.0000"
_DAY_MS = 24 * 3600 * 1000


class NoOpSessions(StreamProcessor[None]):
    """Hooks that do nothing: measures the engine, not the processor."""

    timeout = WebSessions.timeout
    grace = WebSessions.grace

    def open(self, key: str, fragment: Mapping[str, Any]) -> None:
        return None

    def update(self, session: None, fragment: Mapping[str, Any]) -> None:
        return None

    def close(self, key: str, session: None) -> dict[str, Any]:
        return {}


def _parsed() -> tuple[str, list[ParsedFragment]]:
    if not APACHE_LOG.is_file():
        progress(f"{APACHE_LOG} is absent: using generated traffic instead")
        return "router.generator (seed 42)", list(
            islice(generate_fragments(6_000, seed=42), 20_000)
        )
    return str(APACHE_LOG), parse_file(APACHE_LOG, "apache")


def _plan(parsed: list[ParsedFragment], count: int) -> list[ParsedFragment | Watermark]:
    """Repeat `parsed` (each copy a day after the previous) up to `count` fragments."""
    span = max(p.timestamp_ms for p in parsed) - min(p.timestamp_ms for p in parsed)
    plan: list[ParsedFragment | Watermark] = []
    fragments = high = copy = 0
    while fragments < count:
        shift = copy * (span + _DAY_MS)
        for item in parsed[: count - fragments]:
            high = max(high, item.timestamp_ms + shift)
            plan.append(ParsedFragment(item.key, item.timestamp_ms + shift, item.fields))
            fragments += 1
            if fragments % WATERMARK_EVERY == 0:
                plan.append(Watermark(high))
        copy += 1
    plan.append(Watermark(high, end=True))
    return plan


def _records(plan: list[ParsedFragment | Watermark], engines: Engines) -> list[Any]:
    """The plan as the engine records of one engine version."""
    return [
        _watermark(engines, offset, item)
        if isinstance(item, Watermark)
        else engines.fragment(offset, item.key, item.timestamp_ms, item.fields)
        for offset, item in enumerate(plan)
    ]


def _watermark(engines: Engines, offset: int, item: Watermark) -> Any:
    """The engine's watermark at `offset`, by keyword: older versions took the offset
    first and named the flag `end_of_input`; `framework.kernel.watermark.Watermark` names it
    `end`."""
    try:
        return engines.watermark(offset=offset, timestamp_ms=item.timestamp_ms, end=item.end)
    except TypeError:
        return engines.watermark(
            offset=offset, timestamp_ms=item.timestamp_ms, end_of_input=item.end
        )


def _wire(plan: list[ParsedFragment | Watermark]) -> list[StreamRecord]:
    """The plan as encoded Kafka records."""
    records = []
    for offset, item in enumerate(plan):
        if isinstance(item, Watermark):
            value, headers = encode_watermark(item)
            records.append(StreamRecord(STREAM, offset, None, value, item.timestamp_ms, headers))
        else:
            key, value = encode_fragment(item)
            records.append(StreamRecord(STREAM, offset, key, value, item.timestamp_ms, []))
    return records


def _run(
    engines: Engines, records: list[Any], make: Callable[[], Any], mode: str
) -> dict[str, Any]:
    """One timed pass; `mode`: "engine", "commits" (snapshots too) or "wire" (StreamTask)."""
    if mode == "wire":
        task = engines.task.resume(make(), StreamState.initial(STREAM))
        engine, handle = task.engine, task.handle
    else:
        engine = engines.engine(STREAM, make())
        handle = engine.process
    sessions = 0
    started = time.perf_counter()
    for record in records:
        for output in handle(record):
            sessions += isinstance(output, engines.session)
        if mode == "commits" and record.offset % COMMIT_EVERY == 0:
            engine.snapshot(record.offset + 1).encode()
    elapsed = time.perf_counter() - started
    return {"seconds": elapsed, "sessions": sessions, "fragments": engine.counters.fragments}


CASES: list[tuple[str, Callable[[], StreamProcessor[Any]], str]] = [
    ("WebSessions", WebSessions, "engine"),
    ("WebSessions + commits", WebSessions, "commits"),
    ("no-op hooks", NoOpSessions, "engine"),
    ("WebSessions, wire records", WebSessions, "wire"),
    ("DeclarativeWebSessions", DeclarativeWebSessions, "engine"),
    ("DeclarativeWebSessions, wire records", DeclarativeWebSessions, "wire"),
]


def _measure(plan: list[Any], versions: list[Engines], repeats: int) -> list[dict[str, Any]]:
    """Time every case `repeats` times, interleaved so that machine noise hits all alike."""
    wire = _wire(plan)
    inputs = {v.label: {"engine": _records(plan, v), "wire": wire} for v in versions}
    for version in versions:  # warm-up: imports, caches, allocator
        _run(version, inputs[version.label]["engine"][:20_000], WebSessions, "engine")
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for _ in range(repeats):
        for name, make, mode in CASES:
            for version in versions:
                records = inputs[version.label]["wire" if mode == "wire" else "engine"]
                result = _run(version, records, make, mode)
                runs.setdefault((name, version.label), []).append(result)
    rows = []
    for (name, label), results in runs.items():
        seconds = statistics.median(run["seconds"] for run in results)
        fragments = results[0]["fragments"]
        rows.append(
            {
                "case": name,
                "engine": label,
                "fragments": fragments,
                "sessions": results[0]["sessions"],
                "seconds": seconds,
                "fragments_per_s": fragments / seconds,
                "best_fragments_per_s": fragments / min(run["seconds"] for run in results),
                "us_per_fragment": seconds / fragments * 1e6,
            }
        )
        progress(f"{name} [{label}]: {fragments / seconds:,.0f} fragments/s (median)")
    return rows


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark, print the table and write benchmarks/out/engine_throughput.json."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fragments", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=5, help="runs per row; the median counts")
    parser.add_argument("--baseline", help="git ref whose engine to run side by side")
    args = parser.parse_args(argv)
    versions = [current_engines()]
    if args.baseline:
        versions.insert(0, baseline_engines(args.baseline))
    source, parsed = _parsed()
    plan = _plan(parsed, args.fragments)
    progress(f"{args.fragments:,} fragments from {source}, {len(plan):,} records")
    rows = _measure(plan, versions, args.repeats)
    columns = ["case", "engine", "fragments", "sessions", "seconds", "fragments_per_s"]
    print_table(rows, [*columns, "best_fragments_per_s", "us_per_fragment"])
    payload = {
        "benchmark": "engine_throughput",
        "source": source,
        "baseline": args.baseline,
        "watermark_every": WATERMARK_EVERY,
        "commit_every": COMMIT_EVERY,
        "repeats": args.repeats,
        "load_average_1min": os.getloadavg()[0],  # other work on the machine skews the numbers
        "results": rows,
    }
    progress(f"wrote {write_json('engine_throughput', payload)}")


if __name__ == "__main__":
    main()
