"""A SIMULATION, not a measurement: how many streams and nodes one ZooKeeper ensemble carries.

Inputs are measured (by `benchmarks.zookeeper_commits`): the ZooKeeper time of
one write, from the rate of writes grouped in multi-operations, and of one
request, from the rate of single pipelined sets minus a write's share.  The
model: every write goes through the leader and is applied one after another
(followers add no write capacity), so the ensemble is one FIFO server.  Each
of `nodes` nodes owns an equal share of the streams and commits every
`interval_s` at its own random phase; a commit writes the streams that moved
(`busy_share` of them; unchanged ones are skipped) as multi-operations of at
most 256 writes (`state.store.BATCH_WRITES`).  A discrete-event run over
`intervals` commit intervals gives the server's utilisation and the commit
rounds' latency; the ensemble is "the limit" once the 99th percentile round
takes more than half the interval (a node would fall behind on commits) or the
server is busier than 70% of the time (no headroom left for reads, watches
and session pings).  What it leaves out: reads, session and watch traffic,
snapshots, a disk slower under load, and client CPU (on this machine the
nodes share the 2 cores with ZooKeeper).
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from typing import Any

__all__ = ["Costs", "Outcome", "max_streams", "run", "simulate"]

BATCH_WRITES = 256
MAX_UTILISATION = 0.7


@dataclass(frozen=True)
class Costs:
    """ZooKeeper's time per write and per request, in seconds."""

    write_s: float
    request_s: float

    @classmethod
    def from_capacity(cls, sets_per_s: float, sets_in_multis_per_s: float) -> Costs:
        """From the measured rates of single sets and of sets grouped in multis."""
        write = 1.0 / sets_in_multis_per_s
        return cls(write, max(0.0, 1.0 / sets_per_s - write))


@dataclass(frozen=True)
class Outcome:
    """One simulated configuration: utilisation and commit round latency."""

    utilisation: float
    round_p99_s: float
    writes_per_s: float

    def within(self, interval_s: float) -> bool:
        """Whether the ensemble keeps up with headroom."""
        return self.utilisation <= MAX_UTILISATION and self.round_p99_s <= interval_s / 2


def run(
    costs: Costs,
    streams: int,
    nodes: int,
    busy_share: float,
    *,
    interval_s: float = 1.0,
    intervals: int = 20,
    seed: int = 7,
) -> Outcome:
    """Simulate `intervals` commit intervals of `nodes` nodes sharing `streams` streams."""
    rng = random.Random(seed)
    phases = [rng.random() * interval_s for _ in range(nodes)]
    moving = [busy_share * streams / nodes] * nodes
    arrivals: list[tuple[float, int, list[int]]] = []  # (time, node, writes per request)
    for tick in range(intervals):
        for node, phase in enumerate(phases):
            writes = round(moving[node])
            if writes:
                requests = math.ceil(writes / BATCH_WRITES)
                sizes = [writes // requests + (i < writes % requests) for i in range(requests)]
                arrivals.append((tick * interval_s + phase, node, sizes))
    arrivals.sort()
    free_at, busy, rounds = 0.0, 0.0, []
    for at, _, sizes in arrivals:
        for size in sizes:  # a node's requests of one round are pipelined, served in order
            service = costs.request_s + size * costs.write_s
            free_at, busy = max(free_at, at) + service, busy + service
        rounds.append(free_at - at)
    span = intervals * interval_s
    p99 = statistics.quantiles(rounds, n=100)[98] if len(rounds) >= 2 else sum(rounds)
    total = sum(sum(sizes) for _, _, sizes in arrivals)
    return Outcome(busy / span, p99, total / span)


def max_streams(
    costs: Costs, nodes: int, busy_share: float, *, interval_s: float = 1.0, ceiling: int = 10**7
) -> int:
    """The most streams (a multiple of `nodes`) the ensemble carries with headroom."""
    low, high = 0, ceiling // nodes
    while low < high:  # in streams per node
        middle = (low + high + 1) // 2
        if run(costs, middle * nodes, nodes, busy_share, interval_s=interval_s).within(interval_s):
            low = middle
        else:
            high = middle - 1
    return low * nodes


def simulate(
    capacity: dict[str, float],
    busy_shares: tuple[float, ...] = (1.0, 0.25),
    node_counts: tuple[int, ...] = (1, 4, 16, 64),
) -> list[dict[str, Any]]:
    """SIMULATION rows: per busy share and node count, the streams until ZooKeeper is the limit."""
    costs = Costs.from_capacity(capacity["sets_per_s"], capacity["sets_in_multis_per_s"])
    rows = []
    for share in busy_shares:
        for nodes in node_counts:
            streams = max_streams(costs, nodes, share)
            outcome = run(costs, max(streams, nodes), nodes, share)
            rows.append(
                {
                    "busy_share": share,
                    "nodes": nodes,
                    "streams_until_zk_is_the_limit": streams,
                    "streams_per_node": streams // nodes,
                    "zk_writes_per_s": round(outcome.writes_per_s),
                    "utilisation": round(outcome.utilisation, 2),
                    "commit_round_p99_ms": round(1000 * outcome.round_p99_s, 1),
                }
            )
    return rows
