"""Failover: from `kill -9` (or SIGTERM) of one of 3 nodes to its streams consuming again.

    .venv/bin/python -m benchmarks.failover [--sessions 20000] [--streams 16]
        [--session-timeout 4] [--repeat 3]

Per run: 3 `sessionizer node` processes sessionize generated traffic; once they
have caught up, one is stopped.  Measured from the signal: until every one of
its streams was resumed by a survivor (`resumed`), and until the survivors have
caught up again after the rest of the input (`caught_up`).  Also counted: the
records re-read from the safe offsets (`replayed`) and duplicate sessions.
After SIGKILL the streams wait for the ZooKeeper session to expire, so
`--session-timeout` bounds `resumed` from below.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.common import print_table, progress, servers, write_json
from framework.kernel.config import ConnectionConfig
from framework.kernel.zookeeper import zookeeper_client
from framework.provision import provision_streams
from framework.sessions import read_sessions
from framework.testing.members import claims_by_owner, wait_for
from framework.testing.nodes import NodeGroup, settled, streams_of
from framework.verify import expected_sessions, verify_sessions
from router.generator import generate_fragments
from router.ingest import produce_fragments
from router.producer import ProducerConfig, StreamProducer
from sessionizer.examples.weblog import WebSessions

__all__ = ["main"]
WEBLOG = "sessionizer.examples.weblog:WebSessions"


def _produce(connection: ConnectionConfig, streams: int, fragments: list, *, end: bool) -> None:
    with StreamProducer(ProducerConfig(connection.bootstrap, connection.app, streams)) as producer:
        produce_fragments(producer, fragments, end_of_input=end)


def _one_run(
    bootstrap: str, zk: str, args: argparse.Namespace, fault: signal.Signals, directory: Path
) -> dict[str, Any]:
    connection = ConnectionConfig(zk, bootstrap, f"fail{uuid.uuid4().hex[:8]}")
    provision_streams(connection, args.streams)
    streams = streams_of(connection.app, args.streams)
    fragments = list(generate_fragments(args.sessions, seed=3))
    half = len(fragments) // 2
    survivors = ["n1", "n3"]
    with (
        NodeGroup(connection, directory, WEBLOG, session_timeout=args.session_timeout) as group,
        zookeeper_client(zk) as client,
    ):
        for node in ("n1", "n2", "n3"):
            group.start(node)
        _produce(connection, args.streams, fragments[:half], end=False)
        wait_for(lambda: settled(client, connection, ["n1", "n2", "n3"], streams), 300, "catch-up")
        owned = claims_by_owner(client, connection.paths).get("n2", set())
        started = time.time()
        group.nodes["n2"].send(fault)
        _produce(connection, args.streams, fragments[half:], end=True)
        wait_for(lambda: settled(client, connection, survivors, streams), 600, "failover", 0.05)
        caught = time.time() - started
        taken = [e for n in survivors for e in group.nodes[n].events("stream_resumed")
                 if e["stream"] in owned and _at(e) >= started]  # fmt: skip
    result = verify_sessions(
        read_sessions(bootstrap, connection.app, deduplicate=False),
        expected_sessions(fragments, WebSessions()),
        len(fragments),
    )
    return {
        "fault": fault.name,
        "streams_moved": len(owned),
        "resumed_s": max(_at(e) for e in taken) - started if len(taken) >= len(owned) else None,
        "caught_up_s": caught,
        "replayed": sum(e["committed_offset"] - e["offset"] for e in taken),
        "duplicates": result.duplicates,
        "exact": result.exact,
    }


def _at(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["timestamp"]).timestamp()


def main(argv: list[str] | None = None) -> None:
    """Repeat each fault and print the median of each measure."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=20_000)
    parser.add_argument("--streams", type=int, default=16)
    parser.add_argument("--session-timeout", type=float, default=4.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    runs = []
    with servers() as cluster, tempfile.TemporaryDirectory() as scratch:
        for fault in (signal.SIGKILL, signal.SIGTERM):
            for i in range(args.repeat):
                progress(f"{fault.name} run {i + 1}/{args.repeat}...")
                directory = Path(scratch) / f"{fault.name}{i}"
                directory.mkdir()
                runs.append(_one_run(cluster.bootstrap, cluster.zk, args, fault, directory))
    rows = [
        _median(fault, [r for r in runs if r["fault"] == fault]) for fault in ("SIGKILL", "SIGTERM")
    ]
    print(f"3 nodes, {args.streams} streams, session timeout {args.session_timeout} s, "
          f"median of {args.repeat} runs")  # fmt: skip
    print_table(rows, ["fault", "streams_moved", "resumed_s", "caught_up_s", "replayed",
                       "duplicates", "exact"])  # fmt: skip
    path = write_json("failover", {"session_timeout": args.session_timeout, "runs": runs})
    progress(f"results written to {path}")


def _median(fault: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    row: dict[str, Any] = {"fault": fault, "exact": all(r["exact"] for r in runs)}
    for key in ("streams_moved", "resumed_s", "caught_up_s", "replayed", "duplicates"):
        values = [r[key] for r in runs if r[key] is not None]
        row[key] = statistics.median(values) if values else None
    return row


if __name__ == "__main__":
    main()
