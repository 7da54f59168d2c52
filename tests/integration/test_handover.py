"""Planned moves hand the engine over (issue 13): real servers, three nodes, the real Apache log.

A node leaves (SIGTERM, SIGTERM with `--drain`) or a node joins and takes
streams; the streams that move are resumed from the handover: zero records
replayed (from the `stream_resumed` events), zero duplicate sessions, output
exact.  `kill -9` leaves no handover: the next owners replay, still exactly.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from framework.kernel.config import ConnectionConfig
from framework.kernel.zookeeper import zookeeper_client
from framework.provision import provision_streams
from framework.sessions import read_sessions
from framework.testing.cli import DATA, cli_json
from framework.testing.members import wait_for
from framework.testing.nodes import NodeGroup, settled, streams_of
from framework.testing.traffic import produce
from framework.verify import expected_sessions, verify_sessions
from router.formats import parse_file
from sessionizer.examples.weblog import WebSessions

pytestmark = pytest.mark.integration
STREAMS = 8
WEBLOG = "sessionizer.examples.weblog:WebSessions"
SETTLE_S = 120


def _apache_fragments() -> list[Any]:
    path = DATA / "apache_logs"
    return list(parse_file(path, "apache"))


def _leave(signum: signal.Signals, *flags: str) -> Callable[..., list[str]]:
    """A move: n2 (started with `flags`) gets `signum`; n1 and n3 take its streams."""

    def move(
        group: NodeGroup, zk: Any, connection: ConnectionConfig, client: str, first: list[Any]
    ) -> list[str]:
        streams = streams_of(connection.app, STREAMS)
        for node in ("n1", "n2", "n3"):
            group.start(node, "--kafka-client", client, *(flags if node == "n2" else ()))
        # Traffic only once all three share the streams: a start-up rebalance after it began
        # would be a planned move of its own (with handovers), before the one under test.
        wait_for(lambda: settled(zk, connection, ["n1", "n2", "n3"], streams), SETTLE_S, "start")
        produce(connection, STREAMS, first, end=False)
        wait_for(lambda: settled(zk, connection, ["n1", "n2", "n3"], streams), SETTLE_S, "catch-up")
        group.nodes["n2"].send(signum)
        if signum == signal.SIGTERM:
            assert group.nodes["n2"].wait(timeout=60) == 0
        return ["n1", "n3"]

    return move


def _join(
    group: NodeGroup, zk: Any, connection: ConnectionConfig, client: str, first: list[Any]
) -> list[str]:
    """A move: n3 joins two busy nodes, which release streams to it."""
    streams = streams_of(connection.app, STREAMS)
    for node in ("n1", "n2"):
        group.start(node, "--kafka-client", client)
    wait_for(lambda: settled(zk, connection, ["n1", "n2"], streams), SETTLE_S, "start")
    produce(connection, STREAMS, first, end=False)
    wait_for(lambda: settled(zk, connection, ["n1", "n2"], streams), SETTLE_S, "catch-up")
    group.start("n3", "--kafka-client", client)
    wait_for(lambda: settled(zk, connection, ["n1", "n2", "n3"], streams), SETTLE_S, "the join")
    return ["n1", "n2", "n3"]


MOVES = {
    "sigterm": (_leave(signal.SIGTERM), "confluent", True),
    "drain": (_leave(signal.SIGTERM, "--drain", "4"), "kafka-python", True),
    "join": (_join, "kafka-python", True),
    "kill-9": (_leave(signal.SIGKILL), "confluent", False),
}


@pytest.mark.parametrize("name", list(MOVES))
def test_a_planned_move_replays_nothing_and_the_output_is_exact(
    zk_hosts: str, kafka_bootstrap: str, app: str, tmp_path: Path, name: str
) -> None:
    move, client, planned = MOVES[name]
    connection = ConnectionConfig(zk_hosts, kafka_bootstrap, app)
    provision_streams(connection, STREAMS)
    streams = streams_of(app, STREAMS)
    fragments = _apache_fragments()
    # At the cut, the sessions of the last burst are open (nothing later closed them yet):
    # the moved streams have something a replay would re-read.
    half = len(fragments) // 2

    with NodeGroup(connection, tmp_path, WEBLOG) as group, zookeeper_client(zk_hosts) as zk:
        survivors = move(group, zk, connection, client, fragments[:half])
        produce(connection, STREAMS, fragments[half:], end=True)
        wait_for(lambda: settled(zk, connection, survivors, streams), SETTLE_S, "the rest")
        moved = [
            event
            for node in group.nodes.values()
            for event in node.events("stream_resumed")
            if event["committed_offset"] > 0  # taken over mid-run, not a first start
        ]
        written = [e for node in group.nodes.values() for e in node.events("handover_written")]
        conn = {"zk": zk_hosts, "bootstrap": kafka_bootstrap, "app": app}
        status = cli_json("status", "--json", **conn)

    sessions = read_sessions(kafka_bootstrap, app, deduplicate=False)
    result = verify_sessions(sessions, expected_sessions(fragments, WebSessions()), len(fragments))
    replayed = sum(event["replay"] for event in moved)
    used = sum(bool(event["handover"]) for event in moved)
    print(f"\n{name} ({client}): {result.line()}; streams moved {len(moved)}, handovers "
          f"written {len(written)}, used {used}, records replayed {replayed}")  # fmt: skip
    assert result.exact, result
    assert moved, "no stream moved mid-run: the test proves nothing"
    assert all(event["offset"] + event["replay"] == event["committed_offset"] for event in moved)
    rows = {row["name"]: row for row in status["streams"]}
    moved_streams = {event["stream"] for event in moved}
    if planned:
        assert used > 0, "no moved stream had open sessions: the handover was never exercised"
        # Every handover written was used, by the next owner, at the offset it was written for.
        taken = {(e["stream"], e["committed_offset"]) for e in moved if e["handover"]}
        assert {(e["stream"], e["committed_offset"]) for e in written} == taken
        assert replayed == 0, [e for e in moved if e["replay"]]
        assert result.duplicates == 0
        assert all(rows[s]["replayed"] == 0 for s in moved_streams), rows
    else:
        assert used == 0 and not written, "a crash cannot leave a handover"
        assert replayed > 0, "nothing was open at the kill: the replay path was not exercised"
