"""What state commits cost ZooKeeper, and how far one ensemble goes (with a labelled simulation).

    .venv/bin/python -m benchmarks.zookeeper_commits [--streams 16 64 288 1024] [--rounds 20]

Measured on one local ZooKeeper server, from one node's real store
(`FencedStateStore` over `ZooKeeperRecords`) with realistic records (the
encoded state of a stream with a few dozen ignore-list entries):

1. the write capacity of this ZooKeeper: version-checked `set`s per second,
   pipelined, and the same writes grouped into multi-operations; and small
   znodes (64 B) set by several concurrent clients at once;
2. one commit round of a node owning S streams (16, 64, 288, 1,024), when every
   stream moved (stream by stream, as before; and as multi-operations, as now)
   and when none moved (now skipped): latency and ZooKeeper writes;
3. one load publish round of the same node (`balancer.load.LoadReporter`) when
   every stream's load changed: a set per stream (as before) and `publish` (one
   multi-operation per 256 loads, as now);
4. a node taking all S streams at start-up or failover (`balancer.claims`): one
   `take` after another (as before: two round trips each) and `take_each` (every
   read, then every claim transaction, in flight at once, as now).

Under `run_all` the run's ZooKeeper is used (its Kafka does not use it);
alone, a ZooKeeper of its own.  Then a simulation, clearly labelled as one
(`benchmarks.zookeeper_simulation`): from the measured capacity, how many
streams one ensemble carries at a 1 s commit interval before it is the limit,
with 1 to 64 nodes.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient

from balancer.claims import release, take, take_each
from balancer.load import LoadReporter, StreamLoad
from benchmarks.common import progress, write_json
from benchmarks.measure import active_cluster
from benchmarks.tables import show
from benchmarks.zookeeper_simulation import simulate
from framework.cluster import LocalCluster
from framework.kernel.paths import AppPaths
from framework.logging import configure_logging
from state.record import IgnoreEntry, StreamState
from state.store import BATCH_BYTES, BATCH_WRITES, FencedStateStore
from state.zookeeper_store import ZooKeeperRecords

__all__ = ["main"]

PARENT = "/bench/stream_state"
LOADS = AppPaths("loads", namespace="bench")
KEY = "203.0.113.7|Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/120.0"


@dataclass(frozen=True)
class Round:
    """One measured commit round."""

    streams: int
    mode: str
    seconds: float
    writes: int
    requests: int


def _state(stream: str, epoch: int, offset: int) -> StreamState:
    """A stream's state as a busy node commits it: a few dozen finished sessions to skip."""
    ignore = tuple(
        IgnoreEntry(f"{KEY}#{i}", 1_700_000_000_000 + i, 1_700_000_060_000 + i, offset + i, offset)
        for i in range(40)
    )
    return StreamState(stream, epoch, offset, offset + 60, 1_700_000_100_000, ignore, None, 12)


def _store(client: KazooClient, streams: Sequence[str]) -> FencedStateStore:
    records = ZooKeeperRecords(client, PARENT)
    store = FencedStateStore(records)
    for stream in streams:
        path = records.path(stream)
        client.ensure_path(path)
        store.load(stream, client.get(path)[1].version)
    return store


def capacity(client: KazooClient, seconds: float) -> dict[str, float]:
    """Pipelined version-checked sets/s on 64 znodes, single and in multis of 64."""
    names = [f"cap.{i:04d}" for i in range(64)]
    data = _state("cap", 1, 1000).encode()
    for name in names:
        client.ensure_path(f"{PARENT}/{name}")
    versions = {n: client.get(f"{PARENT}/{n}")[1].version for n in names}
    writes, started = 0, time.monotonic()
    while time.monotonic() - started < seconds:
        pending = [(n, client.set_async(f"{PARENT}/{n}", data, version=versions[n])) for n in names]
        for name, result in pending:
            versions[name] = result.get().version
        writes += len(names)
    single = writes / (time.monotonic() - started)
    multis, started = 0, time.monotonic()
    while time.monotonic() - started < seconds:
        transaction = client.transaction()
        for name in names:
            transaction.set_data(f"{PARENT}/{name}", data, version=versions[name])
        for name, stat in zip(names, transaction.commit(), strict=True):
            versions[name] = stat.version
        multis += 1
    multi = multis * len(names) / (time.monotonic() - started)
    return {"sets_per_s": single, "sets_in_multis_per_s": multi, "record_bytes": len(data)}


def small_capacity(zk: str, seconds: float, clients: int = 4, znodes: int = 64) -> float:
    """Sets/s of 64-byte znodes from `clients` concurrent sessions, each pipelining `znodes`.

    The sessions share this process (and its GIL) and the machine's cores with the
    server: a lower bound of what the server itself can apply.
    """
    data = b"x" * 64
    counts = [0] * clients
    start = threading.Barrier(clients + 1)

    def writer(index: int) -> None:
        client = KazooClient(hosts=zk, timeout=10)
        client.start(timeout=30)
        try:
            paths = [f"{PARENT}/small.{index}.{i:03d}" for i in range(znodes)]
            for path in paths:
                client.ensure_path(path)
            start.wait()
            began = time.monotonic()
            while time.monotonic() - began < seconds:
                for result in [client.set_async(path, data) for path in paths]:
                    result.get()
                counts[index] += znodes
        finally:
            client.stop()
            client.close()

    threads = [threading.Thread(target=writer, args=(i,), daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.monotonic()
    for thread in threads:
        thread.join(timeout=seconds + 60)
    return sum(counts) / (time.monotonic() - began)


def commit_rounds(client: KazooClient, count: int, rounds: int) -> list[Round]:
    """Median-able rounds of a node owning `count` streams, in the three modes."""
    streams = [f"s{count}.stream.{i:04d}" for i in range(count)]
    store = _store(client, streams)
    epochs = {s: client.get(f"{PARENT}/{s}")[1].version for s in streams}
    measured: list[Round] = []
    offset = 0
    for _ in range(rounds):
        offset += 100
        states = [_state(s, epochs[s], offset) for s in streams]
        started = time.monotonic()
        for state in states:  # before: one set per stream, one round trip each
            store.commit(state.stream, state)
        measured.append(Round(count, "each stream", time.monotonic() - started, count, count))
        offset += 100
        states = [_state(s, epochs[s], offset) for s in streams]
        started = time.monotonic()
        outcomes = store.commit_many(states)  # now: multi-operations
        assert all(error is None for error in outcomes.values()), outcomes
        size = sum(len(s.encode()) for s in states)
        requests = max(-(-count // BATCH_WRITES), -(-size // BATCH_BYTES))
        measured.append(Round(count, "multi", time.monotonic() - started, count, requests))
        measured.append(Round(count, "unchanged (skipped)", 0.0, 0, 0))
    return measured


def publish_rounds(client: KazooClient, count: int, rounds: int) -> list[Round]:
    """Load publish rounds of a node holding `count` streams, every load changed each time."""
    streams = [f"s{count}.stream.{i:04d}" for i in range(count)]
    client.ensure_path(LOADS.stream_loads)
    for stream in streams:
        client.ensure_path(LOADS.stream_load(stream))
    reporter = LoadReporter(client, LOADS, "bench", window=1.0, publish_interval=1.0)
    counts = dict.fromkeys(streams, 0)
    reporter.meter.sample(0.0, counts, 0.0)
    reporter.publish(0.0, streams)  # nothing measured yet: nothing written
    measured: list[Round] = []
    for i in range(1, 2 * rounds + 1):
        counts = {s: c + 100 * i * (1 + j % 5) for j, (s, c) in enumerate(counts.items())}
        reporter.meter.sample(2.0 * i, counts, float(i))
        started = time.monotonic()
        if i % 2:  # before: a set per stream, one round trip each
            for stream in streams:
                estimate = reporter.meter.estimate(stream)
                assert estimate is not None
                load = StreamLoad(*estimate, node="bench")
                client.set(LOADS.stream_load(stream), load.encode())
            mode, requests = "load publish, each stream", count
        else:
            assert reporter.publish(2.0 * i, streams) == count
            mode, requests = "load publish, multi", -(-count // 256)
        measured.append(Round(count, mode, time.monotonic() - started, count, requests))
    return measured


def claim_rounds(client: KazooClient, count: int, rounds: int) -> list[Round]:
    """A node taking `count` streams that have state znodes, then releasing them."""
    paths = AppPaths(f"claims{count}", namespace="bench")
    streams = [f"s{count}.stream.{i:04d}" for i in range(count)]
    client.ensure_path(paths.claimed_streams)
    for stream in streams:
        client.ensure_path(paths.stream_state(stream))
    session = client.client_id[0]
    measured: list[Round] = []
    for i in range(2 * rounds):
        started = time.monotonic()
        if i % 2:
            taken = [lease for _, lease in take_each(client, paths, streams, "bench", session)]
            mode, requests = "claims, take_each", 2 * count
        else:  # before: one take after another, two round trips each
            taken = [take(client, paths, stream, "bench", session) for stream in streams]
            mode, requests = "claims, take per stream", 2 * count
        measured.append(Round(count, mode, time.monotonic() - started, count, requests))
        assert all(lease is not None for lease in taken)
        release(client, paths, streams, session)
    client.delete(paths.root, recursive=True)
    return measured


def _summary(rounds: list[Round]) -> list[dict[str, Any]]:
    rows = []
    for key in sorted({(r.streams, r.mode) for r in rounds}, key=lambda k: (k[0], k[1])):
        same = [r for r in rounds if (r.streams, r.mode) == key]
        median = statistics.median(r.seconds for r in same)
        rows.append(
            {
                "streams": key[0],
                "mode": key[1],
                "round_ms_median": round(1000 * median, 2),
                "zk_writes_per_round": same[0].writes,
                "zk_requests_per_round": same[0].requests,
            }
        )
    return rows


@contextmanager
def _zookeeper() -> Iterator[str]:
    """The run's ZooKeeper under run_all, else a one-server ZooKeeper of this run's own."""
    cluster = active_cluster()
    if cluster is not None:
        yield cluster.zk
        return
    with tempfile.TemporaryDirectory(prefix="sessionizer-zkbench-") as directory:
        progress("starting a local ZooKeeper for this run...")
        with LocalCluster(directory, zookeepers=1, brokers=0) as local:
            yield local.zk_connect


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, simulate, print and write benchmarks/out/zookeeper_commits.json."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[16, 64, 288, 1024])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--capacity-seconds", type=float, default=5.0)
    args = parser.parse_args(argv)
    configure_logging("warning")
    with _zookeeper() as zk:
        client = KazooClient(hosts=zk, timeout=10)
        client.start(timeout=30)
        try:
            client.delete(PARENT, recursive=True)  # a previous run's znodes, if any
            client.delete(LOADS.root, recursive=True)
            cap: dict[str, float] = capacity(client, args.capacity_seconds)
            pipelined, in_multis = cap["sets_per_s"], cap["sets_in_multis_per_s"]
            progress(f"capacity: {pipelined:,.0f} sets/s, {in_multis:,.0f} in multis")
            cap["small_bytes"] = 64
            cap["small_sets_per_s"] = small_capacity(zk, args.capacity_seconds)
            progress(f"small znodes, 4 clients: {cap['small_sets_per_s']:,.0f} sets/s")
            rounds = []
            for count in args.streams:
                progress(f"commit rounds at {count:,} streams...")
                rounds += commit_rounds(client, count, args.rounds)
                rounds += publish_rounds(client, count, args.rounds)
                rounds += claim_rounds(client, count, args.rounds)
        finally:
            client.delete(PARENT, recursive=True)
            client.delete(LOADS.root, recursive=True)
            client.stop()
            client.close()
    rows = _summary(rounds)
    simulated = simulate(cap)
    show("ZooKeeper write capacity (measured, 1 server, this machine)", [cap], list(cap))
    show("one node's commit round (measured)", rows, list(rows[0]))
    show("SIMULATION from the figures above (not measured)", simulated, list(simulated[0]))
    payload = {"benchmark": "zookeeper_commits", "params": vars(args), "capacity": cap,
               "rounds": rows, "simulation": simulated}  # fmt: skip
    progress(f"results written to {write_json('zookeeper_commits', payload)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
