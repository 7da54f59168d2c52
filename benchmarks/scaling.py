"""Scenario 5: how throughput, state and convergence change with streams and nodes on this machine.

    .venv/bin/python -m benchmarks.scaling [--workload apache|generated]
        [--fragments 1000000] [--streams 16 64 288] [--nodes 1 2 3 4]
        [--kafka-client confluent|kafka-python]

For each stream count (288 is the thesis's), the workload is produced once
(the producer's rate is reported too), read once by one bare reader (the
ceiling), then sessionized from a fresh state by 1..4 nodes in turn.  Per run:
fragments/s; the nodes' CPU seconds per million fragments (flat across node
counts means the work divides without overhead; it is the machine's cores
that run out); `cores_busy`, the whole machine's busy cores during the run
(Kafka and ZooKeeper included: near the core count, the machine is the limit);
the state written to ZooKeeper (writes, bytes, and the size of all
`stream_state` records at the end); and convergence: from spawning the nodes
to ZooKeeper showing every stream claimed with a spread <= 1 (`converge_s`,
interpreter start-up included) and from the last node's `node_started` line
(`after_join_s`).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import progress
from benchmarks.measure import BenchCluster, bench_cluster, delete_app, load_average, save_scenario
from benchmarks.nodes_vs_bare import CLIENTS, new_connection, run_bare, run_nodes
from benchmarks.tables import show
from benchmarks.workload import DEFAULT_FRAGMENTS, WORKLOADS, Workload, load, produce
from framework.testing.nodes import streams_of

__all__ = ["main"]


def _one_stream_count(
    cluster: BenchCluster,
    workload: Workload,
    streams: int,
    args: argparse.Namespace,
    scratch: Path,
) -> list[dict[str, Any]]:
    connection = new_connection(cluster, "scale")
    rows: list[dict[str, Any]] = []
    try:
        produced = produce(workload, connection, streams)
        producer_rate = len(workload.fragments) / produced.seconds
        progress(f"[{streams} streams] 1 bare reader...")
        bare = run_bare(cluster, streams_of(connection.app, streams), 1, args.kafka_client)
        bare_rate = len(workload.fragments) / bare["seconds"]
        for nodes in args.nodes:
            progress(f"[{streams} streams] {nodes} node(s)...")
            client = ("--kafka-client", args.kafka_client)
            run = run_nodes(cluster, produced, workload, nodes, scratch, extra=client)
            progress(
                f"    {run['fragments_per_s']:,.0f} fragments/s, "
                f"converged in {run['converge_s'] or 0:.2f} s"
            )
            rows.append(
                {
                    "streams": streams,
                    "nodes": nodes,
                    "fragments_per_s": run["fragments_per_s"],
                    "speedup": run["fragments_per_s"] / rows[0]["fragments_per_s"] if rows else 1.0,
                    "cpu_s_per_M": run["node_cpu_s"] / len(workload.fragments) * 1e6,
                    "cores_busy": run["cores_busy"],
                    "state_writes": run["state_writes"],
                    "state_bytes_written": run["state_bytes_written"],
                    "state_kb_per_s": run["state_bytes_written"] / run["seconds"] / 1024,
                    "state_bytes_final": run["state_bytes_final"],
                    "state_bytes_peak": run["state_bytes_peak"],
                    "zk_disk_written": run["zk_disk_written"],
                    "converge_s": run["converge_s"],
                    "after_join_s": run["converge_after_join_s"],
                    "exact": run["exact"],
                    "seconds": run["seconds"],
                    "producer_fragments_per_s": producer_rate,
                    "bare_fragments_per_s": bare_rate,
                }
            )
    finally:
        delete_app(connection)
    return rows


COLUMNS = [
    "streams",
    "nodes",
    "fragments_per_s",
    "speedup",
    "cpu_s_per_M",
    "cores_busy",
    "state_writes",
    "state_kb_per_s",
    "state_bytes_peak",
    "converge_s",
    "after_join_s",
    "exact",
]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the grid, print the table, write benchmarks/out/scaling.json."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", choices=WORKLOADS, default="apache")
    parser.add_argument("--fragments", type=int, default=DEFAULT_FRAGMENTS)
    parser.add_argument("--streams", type=int, nargs="+", default=[16, 64, 288])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument(
        "--kafka-client",
        choices=CLIENTS,
        default="confluent",
        help="the Kafka client of the nodes and the bare reader",
    )
    args = parser.parse_args(argv)
    load_before = load_average()
    progress(f"building the {args.workload} workload ({args.fragments:,} fragments)...")
    workload = load(args.workload, args.fragments)
    summary = workload.summary()
    with bench_cluster() as cluster, tempfile.TemporaryDirectory() as scratch:
        rows = [
            row
            for streams in args.streams
            for row in _one_stream_count(cluster, workload, streams, args, Path(scratch))
        ]
    show(f"scaling: {args.fragments:,} {args.workload} fragments", rows, COLUMNS)
    producer = {
        r["streams"]: (r["producer_fragments_per_s"], r["bare_fragments_per_s"]) for r in rows
    }
    for streams, (produced, bare) in producer.items():
        print(
            f"  {streams} streams: StreamProducer {produced:,.0f} fragments/s, "
            f"1 bare reader {bare:,.0f} fragments/s"
        )
    return save_scenario("scaling", args, [summary], load_before, rows)


if __name__ == "__main__":
    main()
