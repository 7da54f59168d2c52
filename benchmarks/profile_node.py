"""Where a node's time goes: py-spy on one node during the node-throughput run, per Kafka client.

    .venv/bin/python -m benchmarks.profile_node [--fragments 300000] [--streams 64]
        [--clients confluent kafka-python] [--rate 100]
        [--delivery at-least-once|exactly-once] [--commit-interval 1] [--idle]

The apache workload is produced once to 64 streams; then, for each client, one
`sessionizer node --kafka-client CLIENT` (WebSessions) sessionizes it from a
fresh state, exactly as in `benchmarks.nodes_vs_bare`, with
`py-spy record --format raw --threads --nonblocking` attached from its spawn
to its exit.  py-spy samples only running threads, so every sample is CPU (or
GIL) time; each is put in one category by its innermost frame that a rule
knows (`classify`): Kafka fetch + decode, record decode, engine (the user's
hooks included), sink, ZooKeeper (commits, claims), logging + metrics, start-up (imports),
other.  `loop thread` is the node's main thread (its loop: the only one that
reads records and runs engines) as a share of the recording's wall time, the
rest of which it was idle (waiting in a poll, or for the GIL) or not yet/no
longer running: `idle = 1 - its samples / (rate x seconds)`.  `other threads`
are the client's I/O threads, kazoo's and the metrics server's, in shares of
one core.  Native threads (librdkafka's) have no Python frames and are not
sampled: the node's CPU seconds from /proc are shown beside.  With the
profiler attached the node runs slower than in nodes_vs_bare; the shares, not
the rate, are the figure.

`--idle` samples the threads while they wait too (py-spy's `--idle`): the shares
then say where the loop *blocks* as well as where it computes (a request to the
brokers or to ZooKeeper on the loop shows up there, and not without it); `idle`
is then only the time py-spy could not sample.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import progress
from benchmarks.measure import BenchCluster, bench_cluster, delete_app, load_average, save_scenario
from benchmarks.nodes_vs_bare import CLIENTS, new_connection, run_nodes
from benchmarks.tables import show
from benchmarks.workload import load, produce
from framework.kernel.transport import Transport

__all__ = ["CATEGORIES", "Profile", "classify", "main", "parse_raw", "summarise"]

IDLE = "idle (waiting, GIL, not running)"
STARTUP = "start-up (imports)"
NATIVE = "no Python frame (interpreter start/exit)"
# A raw frame is `function (path/to/file.py:line)`, the path relative to its sys.path
# entry.  Innermost frame first: the first frame a rule matches decides the sample's
# category.  The sink comes before the Kafka client (kafka-python's producer is under kafka/).
_AT = r"(?:^|[(/])"
_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "ZooKeeper (commits, claims)",
        # state/tracker.py is the engine's safe-offset bookkeeping, not ZooKeeper's.
        re.compile(rf"{_AT}kazoo/|{_AT}state/(?!tracker)|^\S*commit\S* \({_AT}?framework/node/"),
    ),
    (
        "sink",
        re.compile(
            rf"{_AT}sessionizer/(kafka_sink|confluent_sink|sinks)\.py|{_AT}kafka/producer/"
            rf"|{_AT}framework/kafka/(kafka_python|confluent)\.py"
            rf"|{_AT}framework/node/deliveries"
        ),
    ),
    ("record decode", re.compile(rf"{_AT}router/wire\.py|{_AT}msgpack/|\bdecode_record\b")),
    (
        "Kafka fetch + decode",
        re.compile(
            rf"{_AT}(kafka|confluent_kafka)/|{_AT}framework/node/(kafka|confluent)_source\.py"
            rf"|{_AT}framework/kafka/(kafka_python|confluent)_reader\.py"
        ),
    ),
    (
        "engine (+ processor hooks)",
        re.compile(rf"{_AT}sessionizer/|{_AT}framework/node/task\.py|{_AT}state/tracker\.py"),
    ),
    ("logging + metrics", re.compile(rf"{_AT}(structlog|prometheus_client|logging)/")),
)
# The node's own code that no rule above claims (its loop, balancing, metrics plumbing).
_NODE_LOOP = ("node loop (other)", re.compile(rf"{_AT}(framework|router|balancer)/"))
CATEGORIES: tuple[str, ...] = (
    "Kafka fetch + decode",
    "record decode",
    "engine (+ processor hooks)",
    "sink",
    "ZooKeeper (commits, claims)",
    "logging + metrics",
    "node loop (other)",
    STARTUP,
    NATIVE,
    "other",
)
_THREAD = re.compile(r"^thread \((?P<id>[^)]*)\)(?::\s*(?P<name>.*))?$")


@dataclass(frozen=True)
class Sample:
    """One collapsed stack of py-spy's raw output: its thread, frames (root first), count."""

    thread: str
    frames: tuple[str, ...]
    count: int


def parse_raw(lines: Iterable[str]) -> list[Sample]:
    """py-spy `--format raw --threads` lines: `thread (ID): NAME;frame;...;frame COUNT`."""
    samples = []
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            continue
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            raise ValueError(f"not a py-spy raw line: {line[:200]!r}")
        first, *frames = stack.split(";")
        thread = _THREAD.match(first)
        name = first if thread is None else (thread["name"] or thread["id"])
        if thread is not None and thread["name"] and frames and frames[0] == thread["name"]:
            frames = frames[1:]  # some py-spy versions repeat the name as the first frame
        if thread is None:  # recorded without --threads: the line is all frames
            name, frames = "?", [first, *frames]
        samples.append(Sample(name, tuple(frames), int(count)))
    return samples


def classify(frames: Iterable[str]) -> str:
    """The category of one stack (root first): imports anywhere, else the innermost known frame.

    Frames of the node's own code that no rule claims count only when nothing else does.
    """
    frames = list(frames)
    if not frames:
        return NATIVE
    if any("_find_and_load" in frame or "<frozen importlib" in frame for frame in frames):
        return STARTUP
    for frame in reversed(frames):
        for category, pattern in _RULES:
            if pattern.search(frame):
                return category
    category, pattern = _NODE_LOOP
    return category if any(pattern.search(frame) for frame in frames) else "other"


@dataclass
class Profile:
    """Samples per category: the loop (main) thread's and all other threads'."""

    rounds: float
    loop: Counter[str] = field(default_factory=Counter)
    others: Counter[str] = field(default_factory=Counter)
    threads: Counter[str] = field(default_factory=Counter)

    def rows(self) -> list[dict[str, Any]]:
        """One row per category (and idle): shares of the recording's wall time.

        `loop_busy_share` leaves start-up and frameless samples out: it is where the
        loop's CPU goes while it runs, whatever the size of the run.
        """
        samples = sum(self.loop.values())
        running = samples - self.loop[STARTUP] - self.loop[NATIVE]
        rows = [
            {
                "category": category,
                "loop_share": self.loop[category] / self.rounds,
                "loop_busy_share": None
                if category in (STARTUP, NATIVE)
                else (self.loop[category] / running if running else 0.0),
                "other_threads_cores": self.others[category] / self.rounds,
            }
            for category in CATEGORIES
        ]
        idle = max(0.0, 1.0 - samples / self.rounds)
        rows.append(
            {"category": IDLE, "loop_share": idle, "loop_busy_share": None,
             "other_threads_cores": None}
        )  # fmt: skip
        return rows


def summarise(samples: Iterable[Sample], rounds: float, loop_thread: str = "MainThread") -> Profile:
    """Categorise samples; `rounds` = sampling rate x seconds recorded (the loop's 100%)."""
    profile = Profile(max(rounds, 1.0))
    for sample in samples:
        category = classify(sample.frames)
        target = profile.loop if sample.thread == loop_thread else profile.others
        target[category] += sample.count
        profile.threads[sample.thread] += sample.count
    return profile


def _py_spy() -> str:
    found = Path(sys.executable).with_name("py-spy")
    path = str(found) if found.exists() else shutil.which("py-spy")
    if path is None:
        raise RuntimeError("py-spy is not installed: pip install -e '.[bench]'")
    return path


class Recorder:
    """py-spy recording one process from its start to its exit (`attach`, then `finish`)."""

    def __init__(self, output: Path, rate: int, *, idle: bool = False) -> None:
        self.output, self.rate, self.idle = output, rate, idle
        self.process: subprocess.Popen[bytes] | None = None
        self.started = self.ended = 0.0

    def attach(self, pids: list[int]) -> None:
        """Start py-spy on the (single) node's pid."""
        command = [
            _py_spy(), "record", "--pid", str(pids[0]), "--format", "raw", "--threads",
            "--nonblocking", "--rate", str(self.rate), "--output", str(self.output),
            *(["--idle"] if self.idle else []),
        ]  # fmt: skip
        deadline = time.monotonic() + 30
        while True:
            self.process = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
            self.started = time.time()
            try:  # py-spy gives up at once on an interpreter that is not yet initialised
                self.process.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"py-spy could not attach to {pids[0]}: {self.finish()}")

    def finish(self, timeout: float = 120.0) -> str:
        """Wait for py-spy to see the process exit and write its file; return its output."""
        if self.process is None:
            raise RuntimeError("py-spy was never attached")
        output, _ = self.process.communicate(timeout=timeout)
        self.ended = time.time()
        if self.process.returncode != 0 or not self.output.exists():
            raise RuntimeError(f"py-spy failed ({self.process.returncode}): {output[-400:]!r}")
        return output.decode(errors="replace")


def _profile_one(
    cluster: BenchCluster, args: argparse.Namespace, produced: Any, workload: Any, client: str
) -> list[dict[str, Any]]:
    scratch = Path(tempfile.mkdtemp(prefix=f"profile-{client}-"))
    recorder = Recorder(scratch / "node.raw", args.rate, idle=args.idle)
    progress(f"[profile] {client}: one node under py-spy ({args.rate} Hz)...")
    run = run_nodes(
        cluster,
        produced,
        workload,
        1,
        scratch,
        extra=(
            "--kafka-client",
            client,
            "--delivery",
            args.delivery,
            "--commit-interval",
            str(args.commit_interval),
        ),
        on_started=recorder.attach,
    )
    recorder.finish()
    seconds = recorder.ended - recorder.started
    with recorder.output.open() as raw:
        profile = summarise(parse_raw(raw), args.rate * seconds)
    progress(f"    {run['fragments_per_s']:,.0f} fragments/s under the profiler")
    if args.raw_dir is not None:  # kept for a flame graph (flamegraph.pl / speedscope)
        Path(args.raw_dir).mkdir(parents=True, exist_ok=True)
        shutil.copy(recorder.output, Path(args.raw_dir) / f"profile_node-{client}.raw")
    shutil.rmtree(scratch, ignore_errors=True)
    extra = {
        "recorded_s": seconds,
        "node_cpu_s": run["node_cpu_s"],
        "fragments_per_s": run["fragments_per_s"],
        "threads": dict(profile.threads),
    }
    return [{"client": client, "delivery": args.delivery, **row, **extra} for row in profile.rows()]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Profile one node per client, print the breakdown, write <out>/profile_node.json."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fragments", type=int, default=300_000)
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--clients", nargs="+", choices=CLIENTS, default=list(CLIENTS))
    parser.add_argument("--rate", type=int, default=100, help="py-spy samples per second")
    parser.add_argument("--raw-dir", help="keep py-spy's raw stacks in this directory")
    parser.add_argument(
        "--delivery", choices=("at-least-once", "at-most-once", "exactly-once"),
        default="at-least-once",
    )  # fmt: skip
    parser.add_argument("--commit-interval", type=float, default=1.0)
    parser.add_argument(
        "--idle", action="store_true", help="sample waiting threads too: where the loop blocks"
    )
    args = parser.parse_args(argv)
    load_before = load_average()
    workload = load("apache", args.fragments)
    rows: list[dict[str, Any]] = []
    with bench_cluster() as cluster:
        connection = new_connection(cluster, "profile")
        try:
            produced = produce(workload, connection, args.streams)
            for client in args.clients:
                transport: Transport = client
                rows += _profile_one(cluster, args, produced, workload, transport)
        finally:
            delete_app(connection)
    columns = [
        "client",
        "delivery",
        "category",
        "loop_share",
        "loop_busy_share",
        "other_threads_cores",
    ]
    show(f"where a node's time goes: {args.fragments:,} apache fragments", rows, columns)
    return save_scenario("profile_node", args, [workload.summary()], load_before, rows)


if __name__ == "__main__":
    main()
