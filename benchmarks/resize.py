"""Live resize (docs/resize.md): 8 -> 12 streams under a steady producer, 2 -> 3 nodes.

    .venv/bin/python -m benchmarks.resize [--fragments 30000] [--rate 1500]
        [--streams 8] [--to 12]

The real Apache log (tests/data/apache_logs, replicated with shifted keys and times
beyond its 10,000 lines, `benchmarks.workload.apache_replicated`) goes to `--streams`
streams at a steady `--rate` by one named producer, which watches the registry, while
2 nodes sessionize it. After a third of the input, `sessionizer streams resize --count
TO` runs (the console script, in a subprocess) and a third node starts; the producer
switches on its own and sends the rest, then its end of input.

Measured from the command's start: the command's own time (`command_s`); until every
new stream was resumed by a node (`consuming_s`, the nodes' `stream_resumed` log
events), and until `status` shows every old stream migrated and every new one
settled (`settled_s`). Also: sessions moved and records held back (`status --json`'s
resize section, `held_total`); the records the nodes commit per second (the growth of
the committed offsets) before the resize (2 nodes, `--streams` streams, from a
quarter of the first third on, while the producer runs) and after it (3 nodes, `--to`
streams, from `consuming_s` until all is committed, the producer's backlog
included), so with a `--rate` the nodes keep up with, both are about that rate (and
a phase shorter than the commit interval shows 0); and the output against the batch
definition (`framework.verify`), which must be exact.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient

from benchmarks.common import progress
from benchmarks.measure import bench_cluster, load_average, save_scenario
from benchmarks.tables import markdown, show
from benchmarks.workload import Workload, apache_replicated
from framework.kernel.config import ConnectionConfig
from framework.kernel.zookeeper import app_client, zookeeper_client
from framework.node.resize_link import resize_progress
from framework.progress import read_states
from framework.provision import provision_streams
from framework.sessions import read_sessions
from framework.testing.members import wait_for
from framework.testing.nodes import NodeGroup, settled_alive, streams_of
from framework.verify import verify_sessions
from router.fragment import ParsedFragment
from router.ingest import produce_fragments
from router.producer import ProducerConfig, StreamProducer
from router.producer_registry import ProducerRegistry

__all__ = ["main", "section"]
WEBLOG = "sessionizer.examples.weblog:WebSessions"
SESSIONIZER = str(Path(sys.executable).with_name("sessionizer"))
COLUMNS = [
    "fragments",
    "resize",
    "command_s",
    "consuming_s",
    "settled_s",
    "sessions_moved",
    "held_back",
    "forwarded",
    "before_per_s",
    "after_per_s",
    "exact",
]


@dataclass
class Committed:
    """Samples the sum of the streams' committed offsets in a thread, and when the resize
    settled (`status`'s resize section)."""

    connection: ConnectionConfig
    streams: list[str]
    samples: list[tuple[float, int]] = field(default_factory=list)
    settled_at: float | None = None
    _done: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _error: BaseException | None = None

    def __enter__(self) -> Committed:
        self._thread = threading.Thread(target=self._run, name="committed", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self._error is not None and exc_info[0] is None:
            raise RuntimeError(f"sampling the committed offsets failed: {self._error!r}")

    def _run(self) -> None:
        try:
            with zookeeper_client(self.connection.zk, timeout=30) as client:
                while not self._done.is_set():
                    states = read_states(client, self.connection.paths, self.streams)
                    now = time.monotonic()
                    self.samples.append((now, sum(s.committed_offset for s in states.values())))
                    if self.settled_at is None:
                        self._resize(client)
                    self._done.wait(0.1)
        except BaseException as exc:  # surfaced on exit; the thread must not die silently
            self._error = exc

    def _resize(self, client: KazooClient) -> None:
        resize = resize_progress(client, self.connection.paths)
        if resize is None:
            return
        if resize["migrated"] == resize["sources"] and resize["settled"] == resize["targets"]:
            self.settled_at = time.monotonic()

    def at(self, moment: float) -> int:
        """The committed sum at the last sample taken at or before `moment`."""
        before = [total for when, total in self.samples if when <= moment]
        return before[-1] if before else 0


def _steady(
    producer: StreamProducer,
    fragments: list[ParsedFragment],
    rate: float,
    *,
    end: bool,
) -> None:
    """Send `fragments` at `rate` per second, in chunks of a tenth of a second."""
    chunk = max(1, int(rate / 10))
    began = time.monotonic()
    for sent in range(0, len(fragments), chunk):
        last = sent + chunk >= len(fragments)
        produce_fragments(producer, fragments[sent : sent + chunk], end_of_input=end and last)
        ahead = began + (sent + chunk) / rate - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)  # the producer's pace, not a wait for a condition


def _resize(connection: ConnectionConfig, count: int) -> dict[str, Any]:
    servers = ["--zk", connection.zk, "--bootstrap", connection.bootstrap, "--app", connection.app]
    result = subprocess.run(
        [SESSIONIZER, "streams", "resize", "--count", str(count), *servers],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        raise RuntimeError(f"streams resize exited {result.returncode}: {result.stderr[-2000:]}")
    printed: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return printed


def _settled(client: KazooClient, connection: ConnectionConfig) -> dict[str, Any] | None:
    """`status`'s resize section once every old stream migrated and every new one settled."""
    resize = resize_progress(client, connection.paths)
    if resize is None or resize["migrated"] < resize["sources"]:
        return None
    return resize if resize["settled"] == resize["targets"] else None


def run(
    args: argparse.Namespace, workload: Workload, zk: str, bootstrap: str, directory: Path
) -> dict[str, Any]:
    """One run: produce, resize, join, verify; the row of the results table."""
    fragments = workload.fragments
    connection = ConnectionConfig(zk, bootstrap, f"resize{uuid.uuid4().hex[:8]}")
    provision_streams(connection, args.streams)
    old, all_streams = streams_of(connection.app, args.streams), streams_of(connection.app, args.to)
    first = len(fragments) // 3
    config = ProducerConfig(bootstrap, connection.app, args.streams, producer_id="bench-1")
    marks: dict[str, float] = {}
    with (
        NodeGroup(connection, directory, WEBLOG) as group,
        zookeeper_client(zk) as zk_client,
        Committed(connection, all_streams) as committed,
    ):
        group.start("n1")
        group.start("n2")
        with app_client(connection) as client:
            registry = ProducerRegistry(client, connection.paths, "bench-1", old)
            with StreamProducer(config, registry=registry) as producer:
                progress(
                    f"  {first:,} fragments to {args.streams} streams at {args.rate:,.0f}/s..."
                )
                marks["produce"] = time.monotonic()
                _steady(producer, fragments[:first], args.rate, end=False)
                marks["resize"], wall_resize = time.monotonic(), time.time()
                progress(f"  sessionizer streams resize --count {args.to}, then a third node...")
                resized = _resize(connection, args.to)
                marks["command"] = time.monotonic()
                group.start("n3")
                progress(f"  the other {len(fragments) - first:,} fragments, then end of input...")
                _steady(producer, fragments[first:], args.rate, end=True)
                marks["produced"] = time.monotonic()
                switched = producer.config.num_streams
        wait_for(
            lambda: settled_alive(zk_client, connection, group, ["n1", "n2", "n3"], all_streams),
            600,
            "the nodes caught up and balanced",
        )
        marks["caught_up"] = time.monotonic()
        resize: dict[str, Any] = wait_for(
            lambda: _settled(zk_client, connection) or {}, 120, "status: the resize settled"
        )
        settled_at = committed.settled_at or time.monotonic()
        resumed = _resumed(group, all_streams[args.streams :], wall_resize)
        consuming = None if resumed is None else marks["resize"] + (resumed - wall_resize)
    if switched != args.to:
        raise RuntimeError(f"the producer routes by {switched} streams, not {args.to}")
    written = read_sessions(bootstrap, connection.app, deduplicate=False)
    result = verify_sessions(written, workload.expected(), len(fragments))
    progress(f"  {result.line()}")
    before_window = (marks["produce"] + (marks["resize"] - marks["produce"]) / 4, marks["resize"])
    after_start = consuming if consuming is not None else marks["command"]
    after_window = (after_start, marks["caught_up"])
    return {
        "fragments": len(fragments),
        "resize": f"{args.streams} -> {args.to}, 2 -> 3 nodes",
        "epoch": resized["epoch"],
        "command_s": round(marks["command"] - marks["resize"], 2),
        "consuming_s": None if consuming is None else round(consuming - marks["resize"], 2),
        "settled_s": round(settled_at - marks["resize"], 2),
        "sessions_moved": resize["sessions_moved"],
        "fragments_moved": resize["fragments_moved"],
        "held_back": resize.get("held_total", 0),
        "forwarded": resize["forwarded"],
        "rate": args.rate,
        "before_per_s": _per_second(committed, *before_window),
        "after_per_s": _per_second(committed, *after_window),
        "exact": result.exact,
        "verification": result.line(),
    }


def _resumed(group: NodeGroup, new: list[str], since: float) -> float | None:
    """Wall time when the last of the new streams was first resumed by a node (its log's
    `stream_resumed`), None if one never was."""
    first: dict[str, float] = {}
    for node in group.nodes.values():
        for event in node.events("stream_resumed"):
            stamp = datetime.fromisoformat(str(event["timestamp"]).replace("Z", "+00:00"))
            at = stamp.timestamp()
            if event.get("stream") in new and at >= since:
                first[event["stream"]] = min(at, first.get(event["stream"], at))
    return max(first.values()) if len(first) == len(new) else None


def _per_second(committed: Committed, start: float, end: float) -> float | None:
    if end <= start:
        return None
    return round((committed.at(end) - committed.at(start)) / (end - start))


def section(payload: dict[str, Any], cpus: int) -> tuple[str, list[Any]]:
    """RESULTS.md's section: the table."""
    rows = payload["results"]
    table = markdown(
        rows,
        [
            "fragments",
            "resize",
            ("command_s", "command s"),
            ("consuming_s", "to every new stream consuming s"),
            ("settled_s", "to settled s"),
            ("sessions_moved", "sessions moved"),
            ("held_back", "records held back"),
            ("before_per_s", "records/s before"),
            ("after_per_s", "records/s after"),
            "exact",
        ],
    )
    return table, []


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the scenario, print one table, write benchmarks/out/resize.json."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fragments", type=int, default=30_000)
    parser.add_argument("--rate", type=float, default=1500.0, help="fragments/s the producer sends")
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--to", type=int, default=12)
    args = parser.parse_args(argv)
    if not 1 <= args.streams < args.to or args.rate <= 0 or args.fragments < 3:
        parser.error("need 1 <= --streams < --to, --rate > 0 and --fragments >= 3")
    load_before = load_average()
    workload = apache_replicated(args.fragments)
    with bench_cluster() as cluster, tempfile.TemporaryDirectory(prefix="bench-resize-") as tmp:
        row = run(args, workload, cluster.zk, cluster.bootstrap, Path(tmp))
    show("live resize", [row], COLUMNS)
    payload = save_scenario("resize", args, [workload.summary()], load_before, [row])
    if not row["exact"]:
        raise RuntimeError(f"the output is not exact: {row['verification']}")
    return payload


if __name__ == "__main__":
    main()
