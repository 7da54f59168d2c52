"""Scenario 6: skewed traffic (4 of 16 streams carry ~70%), 2 then 3 nodes, `--balance count|load`.

    .venv/bin/python -m benchmarks.skew [--workload apache|generated] [--fragments 400000]
        [--rate 1000] [--interval 6] [--policies count load] [--settle 180]

The workload's first `--fragments` are skewed: every fragment of the keys the
routing hash sends to streams 0-3 is kept, and of the other keys a sample (by a
hash of the key, so spread over the whole run) just large enough for the hot
streams to carry 70% of what is left, in every stretch of it
(`framework.testing.traffic.skewed`).  Per
policy, on a fresh app, a producer thread writes them at `--rate` fragments/s
(all streams together) while:

1. n1 runs alone until every stream has a published load;
2. n2 joins; the phase ends once the group is steady for one `--interval`
   (`count`: every stream claimed by n1 and n2 with a load; `load`: also every
   node's load within the tolerance, 0.2, of the mean) or after `--settle`
   seconds (then `steady` is no);
3. n3 joins; the same.

Every node runs `--balance POLICY --balance-interval INTERVAL`.  Per phase:
each node's load (fragments/s: its streams' `stream_load` rates summed, as
`sessionizer status --json` shows under `node_loads`), averaged over the
readings (every 0.5 s) of the steady stretch; `imbalance`, the busiest node's
load over the mean (1.00 is even); `moves`, streams released from the join to
the end of the phase (a count rebalance's and load moves alike), of which
`load_moves` were load moves (`stream_moved` lines); `settle_s`, from the
joiner's `node_started` line to the start of the steady stretch.  Then the
traffic stops (end of input), the nodes catch up, and the sessions written are
checked against the batch definition of what was sent (`exact`).
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from balancer.load_plan import within_tolerance
from balancer.status import load_summary, snapshot
from benchmarks.common import progress
from benchmarks.measure import BenchCluster, bench_cluster, delete_app, load_average, save_scenario
from benchmarks.move_events import event_time, imbalance, mean_loads, released_streams
from benchmarks.nodes_vs_bare import WEBLOG, new_connection
from benchmarks.tables import show
from benchmarks.workload import WORKLOADS, Workload, load
from framework.kernel.config import ConnectionConfig
from framework.kernel.zookeeper import zookeeper_client
from framework.provision import provision_streams
from framework.sessions import read_sessions
from framework.testing.nodes import NodeGroup, caught_up, streams_of
from framework.testing.traffic import SteadyTraffic, skewed
from framework.verify import expected_sessions, verify_sessions
from router.fragment import ParsedFragment
from router.hashing import stream_for_key
from sessionizer.examples.weblog import WebSessions

__all__ = ["HOT", "STREAMS", "TOLERANCE", "main"]

STREAMS = 16
HOT = frozenset(range(4))
HOT_SHARE = 0.70
TOLERANCE = 0.2  # the node's default --balance-tolerance
POLICIES = ("count", "load")


def node_loads(client: KazooClient, connection: ConnectionConfig, members: list[str]) -> Any:
    """Per-member load (`status --json`'s `node_loads`) once every stream is claimed by
    `members` and has a published load; else None."""
    try:
        status = snapshot(client, connection.paths)
        status.update(load_summary(client, connection.paths, status))
    except KazooException:
        return None
    if {row["owner"] for row in status["streams"]} != set(members):
        return None
    if any(row["load"] is None for row in status["streams"]):
        return None
    loads = status["node_loads"]
    return loads if set(loads) == set(members) else None


@dataclass
class Phase:
    """What one phase saw: the readings of its steady stretch, and when it started."""

    readings: list[dict[str, float]]
    steady: bool
    steady_at: float


def _phase(
    client: KazooClient,
    group: NodeGroup,
    traffic: SteadyTraffic,
    members: list[str],
    policy: str,
    args: argparse.Namespace,
) -> Phase:
    """Readings every 0.5 s until the steady stretch has held one interval, or `--settle`."""
    deadline = time.monotonic() + args.settle
    stretch: list[dict[str, float]] = []
    recent: deque[tuple[float, dict[str, float]]] = deque()  # the last interval's readings
    since = 0.0
    while time.monotonic() < deadline:
        dead = [n for n in members if n not in group.running()]
        if dead:
            raise RuntimeError(f"node(s) {dead} exited; logs in {group.nodes[dead[0]].log_path}")
        if traffic.sent >= len(traffic.fragments):  # idle nodes would look balanced
            raise RuntimeError("the traffic ran out before the phase ended: raise --fragments")
        loads = node_loads(client, group.connection, members)
        now = time.time()
        if loads is not None:
            recent.append((now, loads))
        while recent and recent[0][0] < now - args.interval:
            recent.popleft()
        if loads is None or (policy == "load" and not within_tolerance(loads, TOLERANCE)):
            stretch = []
        else:
            since = since if stretch else now
            stretch.append(loads)
            if now - since >= args.interval:
                return Phase(stretch, True, since)
        time.sleep(0.5)
    # Not steady in time: what the last interval's complete readings show.
    return Phase([loads for _, loads in recent], False, time.time())


def _one_policy(
    cluster: BenchCluster,
    pool: list[ParsedFragment],
    policy: str,
    args: argparse.Namespace,
    scratch: Path,
) -> list[dict[str, Any]]:
    connection = new_connection(cluster, "skew")
    try:
        return _measure(cluster, connection, pool, policy, args, scratch)
    finally:
        delete_app(connection)


def _measure(
    cluster: BenchCluster,
    connection: ConnectionConfig,
    pool: list[ParsedFragment],
    policy: str,
    args: argparse.Namespace,
    scratch: Path,
) -> list[dict[str, Any]]:
    provision_streams(connection, STREAMS)
    streams = streams_of(connection.app, STREAMS)
    flags = ("--balance", policy, "--balance-interval", str(args.interval))
    directory = scratch / f"{policy}-{uuid.uuid4().hex[:6]}"
    directory.mkdir()
    traffic = SteadyTraffic(connection, STREAMS, pool, args.rate)
    phases: list[tuple[list[str], float, Phase, float]] = []  # members, joined, phase, end
    with (
        NodeGroup(connection, directory, WEBLOG) as group,
        zookeeper_client(cluster.zk) as client,
        traffic.running(),
    ):
        group.start("n1", *flags)
        _until(lambda: node_loads(client, connection, ["n1"]), args.settle, "n1's loads")
        for members in (["n1", "n2"], ["n1", "n2", "n3"]):
            joined = time.time()
            group.start(members[-1], *flags)
            progress(f"    {policy}: {len(members)} nodes...")
            phase = _phase(client, group, traffic, members, policy, args)
            phases.append((members, joined, phase, time.time()))
        traffic.stop()
        _until(lambda: _caught_up(client, connection, streams), 600, "the nodes to catch up")
        events = [e for node in group.nodes.values() for e in node.events()]
    sent = pool[: traffic.sent]
    written = read_sessions(cluster.bootstrap, connection.app, deduplicate=False)
    verdict = verify_sessions(written, expected_sessions(sent, WebSessions()), len(sent))
    return [_row(policy, members, joined, phase, end, events, verdict, len(sent))
            for members, joined, phase, end in phases]  # fmt: skip


def _caught_up(client: KazooClient, connection: ConnectionConfig, streams: list[str]) -> bool:
    try:
        return caught_up(client, connection, streams)
    except KazooException:
        return False


def _until(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.5)


def _row(
    policy: str,
    members: list[str],
    joined: float,
    phase: Phase,
    end: float,
    events: list[dict[str, Any]],
    verdict: Any,
    sent: int,
) -> dict[str, Any]:
    loads = mean_loads(phase.readings)
    joiner = [e for e in events if e.get("node") == members[-1] and _is(e, "node_started")]
    started = min((event_time(e) for e in joiner), default=joined)
    moved = [e for e in events if _is(e, "stream_moved") and joined <= event_time(e) < end]
    return {
        "policy": policy,
        "nodes": len(members),
        "node_loads": {m: round(v, 1) for m, v in sorted(loads.items())},
        "imbalance": imbalance(loads),
        "moves": released_streams(events, joined, end),
        "load_moves": len(moved),
        "settle_s": phase.steady_at - started if phase.steady else None,
        "steady": phase.steady,
        "exact": verdict.exact,
        "duplicates": verdict.duplicates,
        "fragments_sent": sent,
    }


def _is(event: dict[str, Any], name: str) -> bool:
    return event.get("event") == name


def loads_cell(row: dict[str, Any]) -> str:
    """`n1 312 / n2 298`: a row's node loads in one cell."""
    return " / ".join(f"{m} {v:,.0f}" for m, v in row["node_loads"].items())


COLUMNS = ["policy", "nodes", "loads", "imbalance", "moves", "load_moves", "settle_s", "steady",
           "exact"]  # fmt: skip


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run each policy, print the table, write benchmarks/out/skew.json."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=WORKLOADS, default="apache")
    parser.add_argument("--fragments", type=int, default=400_000, help="before skewing")
    parser.add_argument("--rate", type=float, default=1000.0, help="fragments/s sent")
    parser.add_argument("--interval", type=float, default=6.0, help="--balance-interval")
    parser.add_argument("--policies", nargs="+", choices=POLICIES, default=list(POLICIES))
    parser.add_argument("--settle", type=float, default=180.0, help="seconds per phase at most")
    args = parser.parse_args(argv)
    load_before = load_average()
    progress(f"building the skewed {args.workload} workload (from {args.fragments:,})...")
    base = load(args.workload, args.fragments)
    pool = skewed(base.fragments, STREAMS, HOT, HOT_SHARE)
    share = sum(stream_for_key(f.key, STREAMS) in HOT for f in pool) / len(pool)
    progress(f"    {len(pool):,} fragments, {share:.0%} on streams 0-3")
    workload = Workload(
        f"{args.workload}-skewed", f"{base.source}, skewed: {share:.0%} on 4/16", pool
    )
    rows: list[dict[str, Any]] = []
    with bench_cluster() as cluster, tempfile.TemporaryDirectory() as scratch:
        for policy in args.policies:
            progress(f"--balance {policy}...")
            rows += _one_policy(cluster, pool, policy, args, Path(scratch))
    for row in rows:
        row["loads"] = loads_cell(row)
    show(
        f"skew: {STREAMS} streams, {share:.0%} of the fragments on 4, {args.rate:,.0f} "
        f"fragments/s, balance interval {args.interval} s",
        rows,
        COLUMNS,
    )
    return save_scenario("skew", args, [workload.summary()], load_before, rows, hot_share=share)


if __name__ == "__main__":
    main()
