"""Session-engine throughput alone: fragments/s through `SessionEngine`, no Kafka, no ZooKeeper.

    .venv/bin/python -m benchmarks.engine_throughput [--fragments 200000] [--repeats 5]

Input: ../shared/data/apache_logs parsed with the router's parser (read in place),
repeated with event times shifted a day per copy until `--fragments` are
reached, with a watermark every 500 fragments and an end-of-input watermark, as
the producer writes them.  Without the log (a user's clone), the traffic
generator's fragments are used instead; the JSON says which.  Parsing and record
building are not timed.  Rows:

- `WebSessions`: the built-in example processor (the number that matters);
- `WebSessions + commits`: plus `snapshot()` and `encode()` every 1,000 records;
- `no-op hooks`: a processor whose hooks do nothing (the engine's own cost).
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
from router.formats import parse_file
from router.fragment import ParsedFragment
from router.generator import generate_fragments
from sessionizer import FinishedSession, Fragment, Record, SessionEngine, StreamProcessor, Watermark
from sessionizer.examples import WebSessions

__all__ = ["main"]

APACHE_LOG = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "apache_logs"
WATERMARK_EVERY = 500
COMMIT_EVERY = 1_000
_DAY_MS = 24 * 3600 * 1000


class NoOpSessions(StreamProcessor):
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


def _records(parsed: list[ParsedFragment], count: int) -> list[Record]:
    """Repeat `parsed` (each copy a day after the previous) up to `count` fragments."""
    span = max(p.timestamp_ms for p in parsed) - min(p.timestamp_ms for p in parsed)
    records: list[Record] = []
    fragments = high = 0
    copy = 0
    while fragments < count:
        shift = copy * (span + _DAY_MS)
        for item in parsed[: count - fragments]:
            high = max(high, item.timestamp_ms + shift)
            records.append(Fragment(len(records), item.key, item.timestamp_ms + shift, item.fields))
            fragments += 1
            if fragments % WATERMARK_EVERY == 0:
                records.append(Watermark(len(records), high))
        copy += 1
    records.append(Watermark(len(records), high, end_of_input=True))
    return records


def _run(
    records: list[Record], make: Callable[[], StreamProcessor], commit: bool
) -> dict[str, Any]:
    engine = SessionEngine("bench.stream.0000", make())
    sessions = 0
    started = time.perf_counter()
    for record in records:
        for output in engine.process(record):
            sessions += isinstance(output, FinishedSession)
        if commit and record.offset % COMMIT_EVERY == 0:
            engine.snapshot(record.offset + 1).encode()
    elapsed = time.perf_counter() - started
    return {"seconds": elapsed, "sessions": sessions, "fragments": engine.counters.fragments}


CASES: list[tuple[str, Callable[[], StreamProcessor], bool]] = [
    ("WebSessions", WebSessions, False),
    ("WebSessions + commits", WebSessions, True),
    ("no-op hooks", NoOpSessions, False),
]


def _measure(records: list[Record], repeats: int) -> list[dict[str, Any]]:
    """Time every case `repeats` times, interleaved so that machine noise hits all alike."""
    _run(records[:20_000], WebSessions, False)  # warm-up: imports, caches, allocator
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in CASES}
    for _ in range(repeats):
        for name, make, commit in CASES:
            runs[name].append(_run(records, make, commit))
    rows = []
    for name, results in runs.items():
        seconds = statistics.median(run["seconds"] for run in results)
        fragments = results[0]["fragments"]
        rows.append(
            {
                "case": name,
                "fragments": fragments,
                "sessions": results[0]["sessions"],
                "seconds": seconds,
                "fragments_per_s": fragments / seconds,
                "best_fragments_per_s": fragments / min(run["seconds"] for run in results),
                "us_per_fragment": seconds / fragments * 1e6,
            }
        )
        progress(f"{name}: {fragments / seconds:,.0f} fragments/s (median)")
    return rows


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark, print the table and write benchmarks/out/engine_throughput.json."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fragments", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=5, help="runs per row; the median counts")
    args = parser.parse_args(argv)
    source, parsed = _parsed()
    records = _records(parsed, args.fragments)
    progress(f"{args.fragments:,} fragments from {source}, {len(records):,} records")
    rows = _measure(records, args.repeats)
    columns = ["case", "fragments", "sessions", "seconds", "fragments_per_s"]
    print_table(rows, [*columns, "best_fragments_per_s", "us_per_fragment"])
    payload = {
        "benchmark": "engine_throughput",
        "source": source,
        "watermark_every": WATERMARK_EVERY,
        "commit_every": COMMIT_EVERY,
        "repeats": args.repeats,
        "load_average_1min": os.getloadavg()[0],  # other work on the machine skews the numbers
        "results": rows,
    }
    progress(f"wrote {write_json('engine_throughput', payload)}")


if __name__ == "__main__":
    main()
