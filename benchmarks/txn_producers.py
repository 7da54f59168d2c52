"""The cost of one transactional producer per stream (issue 22, docs/exactly-once.md), the first
layout of exactly-once, against one producer with many streams per transaction (`--records`,
the node's layout since).

For each client and each stream count: open that many transactional producers
through `framework.kafka.transactional` (as an exactly-once node does on taking
its streams), time their `init_transactions` (`--in-flight` at once), count the process's threads,
sockets and resident memory before and after, then time commit rounds (per
stream: begin, one state record, commit; `--in-flight` at once, as the first layout did),
with the process's CPU seconds per round (every thread, the clients' own included).

    .venv/bin/python -m benchmarks.txn_producers [--streams 64 288] [--rounds 5]
        [--clients confluent kafka-python] [--in-flight 16 64] [--records 1]
        [--bootstrap HOST:PORT --zk HOST:PORT]

Without `--bootstrap`, a one-broker local cluster is started for the run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any

from framework.cluster import LocalCluster
from framework.kafka.transactional import TransactionalProducer, open_transactional_producer
from framework.kernel.config import ConnectionConfig
from framework.provision import provision_streams
from router.provisioning import state_topic

RECORD = b"x" * 200  # about a small stream's state record


def process_figures() -> dict[str, float]:
    """Threads, sockets and resident MiB of this process, from /proc."""
    fds = os.listdir("/proc/self/fd")
    sockets = 0
    for fd in fds:
        try:
            sockets += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            continue
    with open("/proc/self/status") as status:
        rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    return {
        "threads": len(os.listdir("/proc/self/task")),
        "sockets": sockets,
        "rss_mib": rss / 1024,
    }


def open_producers(client: str, bootstrap: str, app: str, count: int) -> list[Any]:
    settings_c = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20}
    settings_k = {"bootstrap_servers": bootstrap, "acks": "all", "linger_ms": 20}
    return [
        open_transactional_producer(
            client, f"{app}.{app}.stream.{i:04d}", kafka_python=settings_k, confluent=settings_c
        )
        for i in range(count)
    ]


def commit_round(
    producers: list[TransactionalProducer], topic: str, in_flight: int, records: int
) -> tuple[float, float]:
    """One round: (wall seconds, CPU seconds of the whole process, client threads included)."""

    def one(producer: TransactionalProducer) -> None:
        producer.begin()
        for index in range(records):  # a group's streams: one state record each
            key = f"{producer.transactional_id}.{index}".encode()
            producer.send(topic, key, RECORD, partition=0)
        producer.commit(30.0)

    started, cpu = time.monotonic(), time.process_time()
    with ThreadPoolExecutor(in_flight) as pool:
        list(pool.map(one, producers))
    return time.monotonic() - started, time.process_time() - cpu


def measure(
    client: str,
    connection: ConnectionConfig,
    count: int,
    rounds: int,
    in_flight: int,
    records: int = 1,
) -> dict[str, Any]:
    before = process_figures()
    started = time.monotonic()
    producers = open_producers(client, connection.bootstrap, connection.app, count)
    created = time.monotonic() - started
    started = time.monotonic()
    with ThreadPoolExecutor(in_flight) as pool:  # as the first layout's takes did
        list(pool.map(lambda producer: producer.init(60.0), producers))
    init = time.monotonic() - started
    opened = process_figures()
    topic = state_topic(connection.app)
    measured = [commit_round(producers, topic, in_flight, records) for _ in range(rounds)]
    times = [wall for wall, _ in measured]
    cpus = [cpu for _, cpu in measured]
    after = process_figures()
    started = time.monotonic()
    for producer in producers:
        producer.close(5.0)
    closed = time.monotonic() - started
    return {
        "client": client,
        "streams": count,
        "in_flight": in_flight,
        "records_per_transaction": records,
        "create_s": round(created, 2),
        "init_transactions_s": round(init, 2),
        "init_ms_per_stream": round(init / count * 1000, 1),
        "threads_added": opened["threads"] - before["threads"],
        "sockets_added": opened["sockets"] - before["sockets"],
        "rss_mib_added": round(after["rss_mib"] - before["rss_mib"], 1),
        "commit_round_s_median": round(statistics.median(times), 3),
        "commit_round_s_all": [round(t, 3) for t in times],
        # kafka-python's I/O threads hold the GIL: this CPU comes out of a node's loop.
        "commit_round_cpu_s_median": round(statistics.median(cpus), 3),
        "close_s": round(closed, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, nargs="+", default=[64, 288])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clients", nargs="+", default=["confluent", "kafka-python"])
    parser.add_argument("--in-flight", type=int, nargs="+", default=[16])
    parser.add_argument(
        "--records",
        type=int,
        default=1,
        help="state records per transaction (the per-group alternative: streams per group)",
    )
    parser.add_argument("--bootstrap")
    parser.add_argument("--zk")
    args = parser.parse_args()
    with ExitStack() as stack:
        if args.bootstrap:
            zk, bootstrap = args.zk, args.bootstrap
        else:
            directory = stack.enter_context(tempfile.TemporaryDirectory())
            cluster = stack.enter_context(LocalCluster(directory, zookeepers=1, brokers=1))
            zk, bootstrap = cluster.zk_connect, cluster.bootstrap
        for client in args.clients:
            for count in args.streams:
                for in_flight in args.in_flight:
                    app = f"txnbench{count}{client[0]}{in_flight}"
                    connection = ConnectionConfig(zk, bootstrap, app)
                    provision_streams(connection, 1)
                    figures = measure(
                        client, connection, count, args.rounds, in_flight, args.records
                    )
                    print(json.dumps(figures), flush=True)


if __name__ == "__main__":
    main()
