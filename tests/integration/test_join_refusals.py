"""A node the app's running nodes rule out refuses at its join, in one line and exit 2, and the
running ones go on undisturbed: another delivery mode (docs/exactly-once.md), a taken --id."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework.kernel.config import ConnectionConfig
from framework.kernel.zookeeper import zookeeper_client
from framework.provision import provision_streams
from framework.testing.members import wait_for
from framework.testing.nodes import NodeGroup, settled, streams_of

pytestmark = pytest.mark.integration
WEBLOG = "sessionizer.examples.weblog:WebSessions"


def test_a_node_started_with_another_delivery_mode_leaves_at_its_join_and_says_why(
    zk_hosts: str, kafka_bootstrap: str, app: str, tmp_path: Path
) -> None:
    """Mixed, an at-least-once node taking an exactly-once node's stream would resume from
    ZooKeeper's hint, an interval behind: `read_committed` readers would see sessions twice."""
    connection = ConnectionConfig(zk_hosts, kafka_bootstrap, app)
    provision_streams(connection, 2)
    streams = streams_of(app, 2)
    with NodeGroup(connection, tmp_path, WEBLOG) as group, zookeeper_client(zk_hosts) as zk:
        group.start("n1", "--delivery", "exactly-once")
        wait_for(lambda: settled(zk, connection, ["n1"], streams), 120, "n1 to take both")
        late = group.start("n2")  # the default: at-least-once
        wait_for(
            lambda: late.process.poll() is not None or late.events("stream_resumed"),
            120,
            "n2 to leave, or to take a stream",
        )
        code = late.wait(timeout=60)
        said = late.log_path.read_text(errors="replace")
        assert code == 2 and "unexpected error" not in said, said[-3000:]
        assert (
            "sessionizer node: error: node n2 left app "
            f"{app} at its join: its delivery is at-least-once, but n1 runs exactly-once."
        ) in said, said[-3000:]
        assert zk.get_children(connection.paths.active_consumers) == ["n1"]
        assert settled(zk, connection, ["n1"], streams)  # n1 kept both streams
        assert group.nodes["n1"].process.poll() is None


def test_a_second_node_with_a_running_nodes_id_refuses_in_one_line_once_it_is_sure(
    zk_hosts: str, kafka_bootstrap: str, app: str, tmp_path: Path
) -> None:
    """It waits out the time a crashed incarnation's session could still hold the id
    (`duplicate_timeout`, 30 s), then refuses: an expected error, not a crash."""
    connection = ConnectionConfig(zk_hosts, kafka_bootstrap, app)
    provision_streams(connection, 2)
    streams = streams_of(app, 2)
    with NodeGroup(connection, tmp_path, WEBLOG) as group, zookeeper_client(zk_hosts) as zk:
        first = group.start("n1")
        wait_for(lambda: settled(zk, connection, ["n1"], streams), 120, "n1 to take both")
        copy = group.spawn("n1-copy", group.command("n1"), log_stderr=True)
        code = copy.wait(timeout=180)
        said = copy.log_path.read_text(errors="replace")
        assert code == 2 and "unexpected error" not in said, said[-3000:]
        assert "two nodes were started with the same --id" in said, said[-3000:]
        assert 1 <= len(copy.events("membership_busy")) <= 8  # every 5 s, not every retry
        assert first.process.poll() is None and settled(zk, connection, ["n1"], streams)
