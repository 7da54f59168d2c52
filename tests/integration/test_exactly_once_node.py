"""One exactly-once node on real servers, `kill -9` mid-run, a restart: every session once.

The basic case of issue 22 (the 3-node fault test is `test_exactly_once_faults.py`):
`node --delivery exactly-once` over the real Apache log, killed with SIGKILL while
it is processing the second half (transactions open, sessions open), then a new
node takes every stream. A `read_committed` reader of `<app>.sessions`, without
de-duplication, must find the batch definition's sessions, each exactly once.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from framework.kernel.config import ConnectionConfig
from framework.kernel.zookeeper import zookeeper_client
from framework.provision import provision_streams
from framework.sessions import read_sessions
from framework.testing.cli import DATA
from framework.testing.members import wait_for
from framework.testing.nodes import NodeGroup, settled, streams_of
from framework.testing.traffic import produce
from framework.verify import expected_sessions, verify_sessions
from router.formats import parse_file
from sessionizer.examples.weblog import WebSessions
from state.record import StreamState
from state.zookeeper_store import ZooKeeperRecords

# Opt-in (`-m slow`, CI time): CI runs kill -9 with exactly-once on both clients, with a
# zombie and a broker restart besides, in test_exactly_once_faults.py.
pytestmark = [pytest.mark.integration, pytest.mark.slow]

STREAMS = 8
WEBLOG = "sessionizer.examples.weblog:WebSessions"


def _committed(zk: KazooClient, connection: ConnectionConfig, streams: list[str]) -> int:
    """The sum of the streams' committed offsets in ZooKeeper's hints."""
    records = ZooKeeperRecords(zk, connection.paths.stream_states)
    return sum(StreamState.decode(records.read(s)[0], stream=s).committed_offset for s in streams)


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_kill_9_mid_run_then_a_restart_commits_every_session_exactly_once(
    zk_hosts: str, kafka_bootstrap: str, app: str, tmp_path: Path, client: str
) -> None:
    connection = ConnectionConfig(zk_hosts, kafka_bootstrap, app)
    provision_streams(connection, STREAMS)
    streams = streams_of(app, STREAMS)
    fragments = parse_file(DATA / "apache_logs", "apache")
    half = len(fragments) // 2
    args = ("--kafka-client", client, "--delivery", "exactly-once", "--commit-interval", "0.2")

    with NodeGroup(connection, tmp_path, WEBLOG) as group, zookeeper_client(zk_hosts) as zk:
        group.start("n1", *args)
        produce(connection, STREAMS, fragments[:half], end=False)
        wait_for(lambda: settled(zk, connection, ["n1"], streams), 120, "first half")
        before = _committed(zk, connection, streams)
        produce(connection, STREAMS, fragments[half:], end=True)
        # Mid-run: some of the second half is committed, not all of it.
        wait_for(lambda: _committed(zk, connection, streams) > before, 60, "second half started")
        group.nodes["n1"].send(signal.SIGKILL)
        assert group.nodes["n1"].wait(timeout=30) == -signal.SIGKILL
        group.start("n2", *args)
        wait_for(lambda: settled(zk, connection, ["n2"], streams), 120, "n2 finished")
        resumed = [e for e in group.nodes["n2"].events("stream_resumed")]

    written = read_sessions(kafka_bootstrap, app, deduplicate=False)  # read_committed
    result = verify_sessions(written, expected_sessions(fragments, WebSessions()), len(fragments))
    print(f"\nexactly-once kill -9 ({client}): {result.line()}; resumed {len(resumed)}")
    assert result.exact, result
    assert result.duplicates == 0, result
    assert len(resumed) == STREAMS
