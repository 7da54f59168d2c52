"""The benchmark workloads: the real Apache log replicated, and generated traffic of the same size.

    .venv/bin/python -m benchmarks.workload [--workload apache|generated|both]
        [--fragments 1000000] [--log tests/data/apache_logs]

Both are deterministic lists of `ParsedFragment` (WebSessions' key
`"<ip>|<agent>"`, event time in ms), built in memory before anything is timed:

- `apache`: tests/data/apache_logs (read in place, never copied), parsed by the
  router's apache parser (9,999 of its 10,000 lines parse), replicated into as
  many copies as `--fragments` needs.  Copy 0 is the log itself; copy k moves
  every client to its own address (IPv6 `2001:db8:k::<the IPv4 as two hex
  words>`, a documentation prefix, so keys of different copies never meet) and
  every event `k * 7` seconds later.  The copies overlap in time like the
  visitors of a site k times as busy, and are merged by event time (each copy
  keeps the log's own order, which is up to 59 s out of order: within the
  2-minute grace).  The first `--fragments` of the merge are the workload.
- `generated`: `router.generator` traffic (seed 7), its first `--fragments`.

`expected()` is the batch definition on the same fragments
(`framework.verify.expected_sessions` with WebSessions: 30-minute gap).
Running the module prints what a workload holds and a digest that changes if
anything in it does.
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import ipaddress
import math
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

from benchmarks.common import print_table, progress
from framework.kernel.config import ConnectionConfig
from framework.provision import provision_streams
from framework.verify import expected_sessions
from router.formats import parse_file
from router.fragment import ParsedFragment
from router.generator import generate_fragments
from router.ingest import produce_fragments
from router.producer import ProducerConfig, ProducerStats, StreamProducer
from sessionizer.examples.weblog import WebSessions

__all__ = [
    "APACHE_LOG",
    "DEFAULT_FRAGMENTS",
    "WORKLOADS",
    "Produced",
    "Workload",
    "apache_replicated",
    "generated",
    "load",
    "main",
    "produce",
]

APACHE_LOG = Path(__file__).resolve().parents[1] / "tests" / "data" / "apache_logs"
DEFAULT_FRAGMENTS = 1_000_000
WORKLOADS = ("apache", "generated")
COPY_SHIFT_MS = 7_000
GENERATED_SEED = 7
Signature = tuple[str, int, int, int]


@dataclass
class Workload:
    """A named, deterministic list of fragments and the sessions the batch definition gives."""

    name: str
    source: str
    fragments: list[ParsedFragment]
    _expected: Counter[Signature] | None = field(default=None, repr=False)

    def expected(self) -> Counter[Signature]:
        """Signatures (key, first_ts, last_ts, fragments) of the batch definition's sessions."""
        if self._expected is None:
            self._expected = expected_sessions(self.fragments, WebSessions())
        return self._expected

    def digest(self) -> str:
        """SHA-256 over every (key, event time), in order: equal digests, equal workloads."""
        h = hashlib.sha256()
        for f in self.fragments:
            h.update(f"{f.key}\x00{f.timestamp_ms}\n".encode())
        return h.hexdigest()[:16]

    def summary(self) -> dict[str, object]:
        """What the workload holds, for tables and JSON."""
        times = [f.timestamp_ms for f in self.fragments]
        return {
            "workload": self.name,
            "fragments": len(self.fragments),
            "keys": len({f.key for f in self.fragments}),
            "sessions": sum(self.expected().values()),
            "event_hours": round((max(times) - min(times)) / 3_600_000, 1) if times else 0,
            "digest": self.digest(),
            "source": self.source,
        }


def _parse_log(log: Path) -> list[ParsedFragment]:
    if not log.is_file():
        raise FileNotFoundError(
            f"{log} is missing: the apache workload replays tests/data/apache_logs in place "
            "(pass --log FILE, or use --workload generated)"
        )
    return parse_file(log, "apache")


def _shifted_ip(ip: str, copy: int) -> str:
    """Copy k's address for an original client address (copy 0 keeps it)."""
    if copy == 0:
        return ip
    number = int(ipaddress.ip_address(ip)) & 0xFFFFFFFF
    return f"2001:db8:{copy:x}::{number >> 16:x}:{number & 0xFFFF:x}"


def _copy(parsed: list[ParsedFragment], copy: int) -> Iterator[ParsedFragment]:
    shift = copy * COPY_SHIFT_MS
    for item in parsed:
        ip = _shifted_ip(item.fields["ip"], copy)
        fields = {**item.fields, "ip": ip}
        yield ParsedFragment(f"{ip}|{fields['agent']}", item.timestamp_ms + shift, fields)


def apache_replicated(count: int = DEFAULT_FRAGMENTS, log: Path = APACHE_LOG) -> Workload:
    """The real log, replicated with shifted keys and times, merged by time, first `count`."""
    parsed = _parse_log(log)
    copies = max(1, math.ceil(count / len(parsed)))
    merged = heapq.merge(*(_copy(parsed, k) for k in range(copies)), key=lambda f: f.timestamp_ms)
    fragments = list(islice(merged, count))
    return Workload("apache", f"{log} x{copies} (shift {COPY_SHIFT_MS // 1000} s)", fragments)


def generated(count: int = DEFAULT_FRAGMENTS, seed: int = GENERATED_SEED) -> Workload:
    """Generated web traffic (`router.generator`), its first `count` fragments."""
    # About 3.6 fragments per session: ask for more sessions than needed, keep `count`.
    fragments = list(islice(generate_fragments(count // 3 + 100, seed=seed), count))
    return Workload("generated", f"router.generator seed {seed}", fragments)


def load(name: str, count: int, log: Path = APACHE_LOG) -> Workload:
    """A workload by name."""
    if name == "apache":
        return apache_replicated(count, log)
    if name == "generated":
        return generated(count)
    raise ValueError(f"unknown workload {name!r}; expected one of {', '.join(WORKLOADS)}")


@dataclass(frozen=True)
class Produced:
    """A workload written to an app's streams with `StreamProducer` (end-of-input included)."""

    connection: ConnectionConfig
    streams: int
    stats: ProducerStats
    seconds: float


def produce(workload: Workload, connection: ConnectionConfig, streams: int) -> Produced:
    """Create the app's streams and send every fragment, then the end-of-input watermark."""
    provision_streams(connection, streams)
    total = len(workload.fragments)
    progress(
        f"  producing {total:,} {workload.name} fragments to {streams} streams "
        f"of app {connection.app}..."
    )

    def report(stats: ProducerStats) -> None:
        progress(f"    produced {stats.read:,}/{total:,}")

    config = ProducerConfig(connection.bootstrap, connection.app, streams)
    started = time.perf_counter()
    with StreamProducer(config) as producer:
        stats = produce_fragments(producer, workload.fragments, end_of_input=True, progress=report)
    seconds = time.perf_counter() - started
    progress(f"    sent {stats.sent:,} in {seconds:.1f} s")
    return Produced(connection, streams, stats, seconds)


def main(argv: list[str] | None = None) -> None:
    """Build the workloads and print what they hold."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=[*WORKLOADS, "both"], default="both")
    parser.add_argument("--fragments", type=int, default=DEFAULT_FRAGMENTS)
    parser.add_argument("--log", type=Path, default=APACHE_LOG)
    args = parser.parse_args(argv)
    names = WORKLOADS if args.workload == "both" else (args.workload,)
    rows = []
    for name in names:
        started = time.perf_counter()
        workload = load(name, args.fragments, args.log)
        row = workload.summary()
        row["build_s"] = time.perf_counter() - started
        rows.append(row)
    print_table(
        rows,
        ["workload", "fragments", "keys", "sessions", "event_hours", "digest", "build_s", "source"],
    )


if __name__ == "__main__":
    main()
