"""Scenario 4: one of 3 nodes stops mid-traffic, or a third one joins; with and without handover.

    .venv/bin/python -m benchmarks.failover_modes [--workload apache|generated]
        [--fragments 200000] [--streams 64] [--session-timeout 4] [--drain 5] [--repeat 3]
        [--modes kill-9 sigterm drain join] [--handover on off]

Per run, on a fresh app: nodes n1, n2, n3 (WebSessions; n2 with `--drain
SECONDS` in the drain case; only n1 and n2 in the join case) sessionize the
first half of the workload and catch up.  The second half is then produced
while they consume, and when a quarter of it is sent, n2 gets the signal
(kill -9, SIGTERM, SIGTERM with --drain) while the nodes are busy: the moved
streams have open sessions, and (after kill -9) output since their last commit.
In the join case n3 is started instead, before the second half: the second half
is produced from its `node_started` line on, so the streams n1 and n2 release
to it have the first half's open sessions and meet traffic.

Every planned move (SIGTERM, drain, join) runs twice: every node with
`--handover on` (the default: the giver hands each open engine over, the taker
reads from the committed offset) and with `--handover off` (the taker replays
from the safe offset, as after a crash).  kill -9 can leave no handover: it
replays by construction.  Measured, from the reference time (the signal; for a
join, the joiner's `node_started` line, so that its interpreter start-up does
not count):

- `first_resumed_s` / `resumed_s`: until the first / the last moved stream was
  resumed by its new owner (its `stream_resumed` line: state loaded, handover
  used or not, reading about to start).  After kill -9 the streams wait for n2's
  ZooKeeper session to expire (`--session-timeout`); SIGTERM commits and
  releases at once; `--drain` releases one stream at a time over the drain
  period while n2 keeps consuming the rest; a join is met by the others
  releasing streams to the new node;
- `caught_up_s`: until the remaining nodes are balanced and every stream's
  committed read position is its end offset (replays included);
- `replayed`: records the new owners re-read before new ones (the sum of
  `replay` over the moved streams' `stream_resumed` events: 0 after a
  handover); `handovers_used`: moved streams resumed from a handover;
- `duplicates`: sessions written twice (same `session_id`, same content) and
  `exact`: no session lost or extra against the batch definition.
"""

from __future__ import annotations

import argparse
import signal
import tempfile
import threading
import time
import uuid
from collections import Counter
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import progress
from benchmarks.measure import (
    BenchCluster,
    StateWatch,
    bench_cluster,
    delete_app,
    load_average,
    save_scenario,
)
from benchmarks.move_events import event_time, medians, move_figures, resumed_since
from benchmarks.nodes_vs_bare import WEBLOG, new_connection
from benchmarks.tables import show
from benchmarks.workload import WORKLOADS, Workload, load
from framework.kernel.config import ConnectionConfig
from framework.kernel.zookeeper import zookeeper_client
from framework.progress import end_offsets
from framework.provision import provision_streams
from framework.sessions import read_sessions
from framework.testing.members import claims_by_owner
from framework.testing.nodes import NodeGroup, streams_of
from framework.verify import verify_sessions
from router.fragment import ParsedFragment
from router.producer import ProducerConfig, StreamProducer

__all__ = ["CASES", "MODES", "Case", "main"]

MODES = {"kill-9": "kill -9", "sigterm": "SIGTERM", "drain": "SIGTERM --drain", "join": "join"}
"""CLI name -> the mode as the tables print it."""
NODES = ("n1", "n2", "n3")


@dataclass(frozen=True)
class Case:
    """One kind of run: a mode, and the nodes' `--handover` (None: kill -9, no choice)."""

    mode: str
    handover: bool | None

    @property
    def flags(self) -> tuple[str, ...]:
        """The `--handover` flag every node of the run gets."""
        return () if self.handover is None else ("--handover", "on" if self.handover else "off")

    @property
    def joining(self) -> bool:
        """A third node joins (instead of n2 leaving)."""
        return self.mode == "join"


CASES = (
    Case("kill -9", None),
    *(Case(MODES[m], h) for m in ("sigterm", "drain", "join") for h in (True, False)),
)


class _Producer(threading.Thread):
    """Sends fragments (then end of input) in the background, counting what it sent."""

    def __init__(self, connection: ConnectionConfig, streams: int, fragments: list, end: bool):
        super().__init__(name="bench-producer", daemon=True)
        self.config = ProducerConfig(connection.bootstrap, connection.app, streams)
        self.fragments: list[ParsedFragment] = fragments
        self.end = end
        self.sent = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with StreamProducer(self.config) as producer:
                for fragment in self.fragments:
                    producer.send(fragment)
                    self.sent += 1
                if self.end:
                    producer.end_of_input()
        except BaseException as exc:  # re-raised by the waiting thread
            self.error = exc

    def finish(self, timeout: float) -> None:
        """Wait for the end; raise what the thread raised."""
        self.join(timeout)
        if self.is_alive():
            raise TimeoutError(f"producing did not finish within {timeout:.0f} s")
        if self.error is not None:
            raise RuntimeError(f"producing failed: {self.error!r}") from self.error


def _wait(watch: StateWatch, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while watch.caught_up_at is None or (watch.members and watch.balanced_at is None):
        watch.check()
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


def _one_run(
    cluster: BenchCluster,
    workload: Workload,
    case: Case,
    args: argparse.Namespace,
    directory: Path,
) -> dict[str, Any]:
    connection = new_connection(cluster, "fail")
    try:
        return _measure(cluster, connection, workload, case, args, directory)
    finally:
        delete_app(connection)


def _start_nodes(group: NodeGroup, nodes: list[str], case: Case, drain: float) -> None:
    for node in nodes:
        drained = ("--drain", str(drain)) if node == "n2" and "drain" in case.mode else ()
        group.start(node, *case.flags, *drained)


def _until_started(group: NodeGroup, node: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not group.nodes[node].events("node_started"):
        if group.nodes[node].process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{node} did not start; its log: {group.nodes[node].log_path}")
        time.sleep(0.05)


def _measure(
    cluster: BenchCluster,
    connection: ConnectionConfig,
    workload: Workload,
    case: Case,
    args: argparse.Namespace,
    directory: Path,
) -> dict[str, Any]:
    provision_streams(connection, args.streams)
    streams = streams_of(connection.app, args.streams)
    fragments = workload.fragments
    half = len(fragments) // 2
    first = _Producer(connection, args.streams, fragments[:half], end=False)
    first.start()
    first.finish(600)
    ends = end_offsets(cluster.bootstrap, streams)
    starting = ["n1", "n2"] if case.joining else list(NODES)
    remaining = list(NODES) if case.joining else ["n1", "n3"]
    with (
        NodeGroup(connection, directory, WEBLOG, session_timeout=args.session_timeout) as group,
        zookeeper_client(cluster.zk) as client,
    ):
        with StateWatch(cluster.zk, connection, streams, ends, starting) as watch:
            _start_nodes(group, starting, case, args.drain)
            _wait(watch, f"{len(starting)} nodes to balance and catch up on the first half", 600)
        rest = _Producer(connection, args.streams, fragments[half:], end=True)
        owned, signalled = _move(group, client, connection, case, args, rest)
        rest.finish(600)
        ends = end_offsets(cluster.bootstrap, streams)
        with StateWatch(cluster.zk, connection, streams, ends, remaining) as watch:
            _wait(watch, f"{remaining} to take over and catch up", 900)
        figures = _figures(group, remaining, signalled, owned, case.joining)
        exit_code = None
        if case.mode in (MODES["sigterm"], MODES["drain"]):  # n2 must exit, and say how
            exit_code = group.nodes["n2"].wait(timeout=120)
    caught_up = max(watch.caught_up_at or 0, watch.balanced_at or 0) - figures["reference"]
    verdict = verify_sessions(
        read_sessions(cluster.bootstrap, connection.app, deduplicate=False),
        workload.expected(),
        len(fragments),
    )
    return {
        "mode": case.mode,
        "handover": _switch(case.handover),
        **figures,
        "caught_up_s": caught_up,
        "duplicates": verdict.duplicates,
        "lost": verdict.lost,
        "exact": verdict.exact,
        "n2_exit": exit_code,
    }


def _move(
    group: NodeGroup,
    client: Any,
    connection: ConnectionConfig,
    case: Case,
    args: argparse.Namespace,
    rest: _Producer,
) -> tuple[set[str] | None, float]:
    """Start the second half and make the move; the streams that must move (None: a join's,
    any it is given) and when the move was made."""
    if case.joining:
        # Joined first, then traffic: the moves meet it, and the first half's open sessions.
        signalled = time.time()
        _start_nodes(group, ["n3"], case, args.drain)
        _until_started(group, "n3", 120)
        rest.start()
        return None, signalled
    rest.start()
    while rest.sent < len(rest.fragments) // 4 and rest.is_alive():
        time.sleep(0.01)
    owned = claims_by_owner(client, connection.paths).get("n2", set())
    signalled = time.time()
    group.nodes["n2"].send(signal.SIGKILL if case.mode == "kill -9" else signal.SIGTERM)
    return owned, signalled


def _figures(
    group: NodeGroup,
    remaining: list[str],
    signalled: float,
    owned: set[str] | None,
    joining: bool,
) -> dict[str, Any]:
    """What the logs say about the move: resume times from the reference, replays, handovers."""
    reference = signalled
    if joining:  # from the joiner's start, not its interpreter's
        reference = min(event_time(e) for e in group.nodes["n3"].events("node_started"))
    events = [e for n in remaining for e in group.nodes[n].events()]
    taken = resumed_since(events, signalled, owned)
    written = [e for n in group.nodes.values() for e in n.events("handover_written")]
    return {
        **move_figures(taken, reference, owned),
        "handovers_written": sum(event_time(e) >= signalled for e in written),
        "reasons": dict(Counter(str(e.get("reason")) for e in taken)),
        "reference": reference,
        "startup_s": reference - signalled,
    }


def _switch(handover: bool | None) -> str:
    return "-" if handover is None else ("on" if handover else "off")


MEDIANS = (
    "streams_moved",
    "handovers_used",
    "first_resumed_s",
    "resumed_s",
    "caught_up_s",
    "replayed",
    "duplicates",
)
COLUMNS = ["mode", "handover", "runs", *MEDIANS, "exact"]


def _cases(args: argparse.Namespace) -> list[Case]:
    modes = {MODES[m] for m in args.modes}
    switches = {h == "on" for h in args.handover}
    return [c for c in CASES if c.mode in modes and (c.handover is None or c.handover in switches)]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Repeat each case, print the medians, write benchmarks/out/failover_modes.json."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=WORKLOADS, default="apache")
    parser.add_argument("--fragments", type=int, default=200_000)
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--session-timeout", type=float, default=4.0)
    parser.add_argument("--drain", type=float, default=5.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--handover", nargs="+", choices=["on", "off"], default=["on", "off"])
    parser.add_argument("--logs", help="keep the nodes' logs here (default: deleted)")
    args = parser.parse_args(argv)
    cases = _cases(args)
    load_before = load_average()
    progress(f"building the {args.workload} workload ({args.fragments:,} fragments)...")
    workload = load(args.workload, args.fragments)
    summary = workload.summary()
    runs: list[dict[str, Any]] = []
    logs = nullcontext(args.logs) if args.logs else tempfile.TemporaryDirectory()
    with bench_cluster() as cluster, logs as scratch:
        for i in range(args.repeat):
            for case in cases:  # interleaved, so that machine noise hits every case alike
                name = f"{case.mode}, handover {_switch(case.handover)}"
                progress(f"{name}: run {i + 1}/{args.repeat}...")
                directory = Path(scratch) / f"run{i}-{uuid.uuid4().hex[:6]}"
                directory.mkdir(parents=True)
                runs.append(_one_run(cluster, workload, case, args, directory))
                last = runs[-1]
                progress(
                    f"    {last['streams_moved']} moved, resumed in {last['resumed_s']} s, "
                    f"replayed {last['replayed']:,}, handovers used {last['handovers_used']}, "
                    f"duplicates {last['duplicates']}, exact {last['exact']}"
                )
    rows = medians(runs, lambda r: (r["mode"], r["handover"]), MEDIANS, carry=("mode", "handover"))
    show(
        f"failover and planned moves: 3 nodes, {args.streams} streams, {args.fragments:,} "
        f"{args.workload} fragments, session timeout {args.session_timeout} s, drain "
        f"{args.drain} s, median of {args.repeat}",
        rows,
        COLUMNS,
    )
    return save_scenario("failover_modes", args, [summary], load_before, rows, runs=runs)


if __name__ == "__main__":
    main()
