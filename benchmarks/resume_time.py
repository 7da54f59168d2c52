"""Resume time: from a node taking its streams to the last of them resumed.

    .venv/bin/python -m benchmarks.resume_time [--streams 64] [--sessions 5000]
        [--open-tail 500] [--repeat 3]

Per run, on a fresh app of `--streams` streams with some traffic sessionized (its
last event time opens `--open-tail` new sessions, left open): node
`a` starts alone and takes every stream (`fresh`: each stream's state is read,
nothing to replay); once it has caught up it is stopped with SIGTERM, which commits
and leaves a handover, and node `b` starts and takes them all (`handover`: each
stream's state, its handover pointer and record are read).  Measured from the
node's `streams_taken` event to its last `stream_resumed` (both in its own log, one
clock): the time a stream is owned and not yet read, which every assignment pays
before its first record, on top of the claim itself.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import tempfile
import time
import uuid
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.common import print_table, progress, servers, write_json
from framework.kernel.config import ConnectionConfig
from framework.kernel.zookeeper import zookeeper_client
from framework.local_nodes import NodeGroup, settled, streams_of
from framework.processes import MemberProcess
from framework.provision import provision_streams
from framework.testing.members import wait_for
from router.generator import generate_fragments
from router.ingest import produce_fragments
from router.producer import ProducerConfig, StreamProducer

__all__ = ["main"]
WEBLOG = "sessionizer.examples.weblog:WebSessions"


def _resume_seconds(node: MemberProcess, streams: int) -> float:
    """From the node's first `streams_taken` to its `streams`-th `stream_resumed`."""

    def all_resumed() -> list[dict[str, Any]]:
        found = node.events("stream_resumed")
        return found if len(found) >= streams else []

    resumed = wait_for(all_resumed, 120, f"node {node.node} resuming {streams} streams")
    taken = node.events("streams_taken")
    return _at(resumed[streams - 1]) - _at(taken[0])


def _at(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["timestamp"]).timestamp()


def _one_run(bootstrap: str, zk: str, args: argparse.Namespace, directory: Path) -> dict[str, Any]:
    connection = ConnectionConfig(zk, bootstrap, f"resume{uuid.uuid4().hex[:8]}")
    provision_streams(connection, args.streams)
    streams = streams_of(connection.app, args.streams)
    fragments = list(generate_fragments(args.sessions, seed=5))
    last = max(fragments, key=lambda f: f.timestamp_ms)
    # One fragment of each of `--open-tail` new keys at the last event time: sessions still
    # open when node a stops, on most streams, so that node b resumes those from handovers.
    fragments += [replace(last, key=f"tail-{i}") for i in range(args.open_tail)]
    config = ProducerConfig(connection.bootstrap, connection.app, args.streams)
    with StreamProducer(config) as producer:
        produce_fragments(producer, fragments, end_of_input=False)
    with NodeGroup(connection, directory, WEBLOG) as group, zookeeper_client(zk) as client:
        first = group.start("a")
        wait_for(lambda: settled(client, connection, ["a"], streams), 300, "node a caught up")
        fresh = _resume_seconds(first, args.streams)
        first.send(signal.SIGTERM)
        first.wait(120)
        second = group.start("b")
        wait_for(lambda: settled(client, connection, ["b"], streams), 300, "node b caught up")
        after_handover = _resume_seconds(second, args.streams)
        handovers = sum(bool(e.get("handover")) for e in second.events("stream_resumed"))
    return {"fresh_s": fresh, "handover_s": after_handover, "handovers": handovers}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Repeat the run; print each and the medians."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--sessions", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--open-tail", type=int, default=500, help="sessions open at the stop")
    args = parser.parse_args(argv)
    runs = []
    with servers() as cluster, tempfile.TemporaryDirectory() as scratch:
        for i in range(args.repeat):
            progress(f"run {i + 1}/{args.repeat}...")
            directory = Path(scratch) / f"run{i}"
            directory.mkdir()
            started = time.monotonic()
            runs.append(_one_run(cluster.bootstrap, cluster.zk, args, directory))
            progress(f"  {runs[-1]} in {time.monotonic() - started:.0f} s")
    median = {
        "run": "median",
        **{k: statistics.median(r[k] for r in runs) for k in ("fresh_s", "handover_s")},
        "handovers": statistics.median(r["handovers"] for r in runs),
    }
    rows = [{"run": str(i + 1), **r} for i, r in enumerate(runs)] + [median]
    print(f"\nresume time: {args.streams} streams, one node taking all of them")
    print_table(rows, ["run", "fresh_s", "handover_s", "handovers"])
    payload = {"streams": args.streams, "sessions": args.sessions, "runs": runs, "median": median}
    write_json("resume_time", payload)
    return payload


if __name__ == "__main__":
    main()
