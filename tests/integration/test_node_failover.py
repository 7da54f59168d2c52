"""Thesis verifications 3.5.1-3.5.3 end to end: nodes die, streams move, output stays exact."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from framework.kernel.config import ConnectionConfig
from framework.kernel.zookeeper import zookeeper_client
from framework.provision import provision_streams
from framework.sessions import read_sessions
from framework.testing.cli import DATA, cli, cli_json
from framework.testing.members import wait_for
from framework.testing.nodes import NodeGroup, settled, streams_of
from framework.testing.traffic import produce
from framework.verify import expected_sessions, verify_sessions
from router.formats import parse_file
from router.generator import generate_fragments
from sessionizer.examples.weblog import WebSessions

pytestmark = pytest.mark.integration
STREAMS = 16
WEBLOG = "sessionizer.examples.weblog:WebSessions"


def _apache_fragments() -> list:
    path = DATA / "apache_logs"
    return parse_file(path, "apache")


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
@pytest.mark.parametrize("fault", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "sigterm"])
def test_a_node_dies_mid_run_and_the_output_is_still_exact(
    zk_hosts: str,
    kafka_bootstrap: str,
    app: str,
    tmp_path: Path,
    fault: signal.Signals,
    client: str,
) -> None:
    connection = ConnectionConfig(zk_hosts, kafka_bootstrap, app)
    provision_streams(connection, STREAMS)
    streams = streams_of(app, STREAMS)
    fragments = _apache_fragments()
    half = len(fragments) // 2

    with NodeGroup(connection, tmp_path, WEBLOG) as group, zookeeper_client(zk_hosts) as zk:
        for node in ("n1", "n2", "n3"):
            group.start(node, "--kafka-client", client)
        produce(connection, STREAMS, fragments[:half], end=False)
        wait_for(lambda: settled(zk, connection, ["n1", "n2", "n3"], streams), 120, "catch-up")

        victim = group.nodes["n2"]
        victim.send(fault)
        if fault == signal.SIGTERM:
            assert victim.wait(timeout=60) == 0
        produce(connection, STREAMS, fragments[half:], end=True)
        wait_for(lambda: settled(zk, connection, ["n1", "n3"], streams), 120, "failover")

        _check_status_and_sessions_commands(connection, survivors=["n1", "n3"])
        resumed = [
            e
            for name in ("n1", "n3")
            for e in group.nodes[name].events("stream_resumed")
            if e["committed_offset"] > 0  # taken over from n2, not the first start
        ]
    written = read_sessions(kafka_bootstrap, app, deduplicate=False)
    result = verify_sessions(written, expected_sessions(fragments, WebSessions()), len(fragments))
    replayed = sum(e["committed_offset"] - e["offset"] for e in resumed)
    print(f"\n{fault.name} ({client}): {result.line()}; streams taken over {len(resumed)}, "
          f"records replayed {replayed}")  # fmt: skip
    assert result.exact, result
    assert resumed, "the victim's streams were never resumed by the survivors"
    if fault == signal.SIGTERM:
        assert result.duplicates == 0  # a clean stop commits before releasing


def _check_status_and_sessions_commands(connection: ConnectionConfig, survivors: list[str]) -> None:
    """`status --json` and `sessions --json` as DESIGN section 11 specifies them."""
    conn = {"zk": connection.zk, "bootstrap": connection.bootstrap, "app": connection.app}
    status = cli_json("status", "--json", **conn)
    assert status["app"] == connection.app
    assert sorted(c["id"] for c in status["consumers"]) == survivors
    assert sum(len(c["streams"]) for c in status["consumers"]) == STREAMS
    columns = {"name", "owner", "safe_offset", "committed_offset", "end_offset",
               "open_sessions", "ignored"}  # fmt: skip
    for row in status["streams"]:
        assert columns <= set(row)
        assert row["owner"] in survivors and row["committed_offset"] == row["end_offset"]
        assert row["open_sessions"] == 0  # end of input closed every session
    code, out, err = cli("sessions", "--json", **conn)
    assert code == 0, err
    sessions = [json.loads(line) for line in out.splitlines()]
    assert len({s["session_id"] for s in sessions}) == len(sessions) > 0


def test_at_most_once_delivery_never_duplicates_even_after_kill_9(
    zk_hosts: str, kafka_bootstrap: str, app: str, tmp_path: Path
) -> None:
    connection = ConnectionConfig(zk_hosts, kafka_bootstrap, app)
    provision_streams(connection, STREAMS)
    streams = streams_of(app, STREAMS)
    fragments = list(generate_fragments(1500, seed=21))
    half = len(fragments) // 2
    with NodeGroup(connection, tmp_path, WEBLOG) as group, zookeeper_client(zk_hosts) as zk:
        for node in ("n1", "n2"):
            group.start(node, "--delivery", "at-most-once")
        produce(connection, STREAMS, fragments[:half], end=False)
        wait_for(lambda: settled(zk, connection, ["n1", "n2"], streams), 120, "catch-up")
        group.nodes["n2"].send(signal.SIGKILL)
        produce(connection, STREAMS, fragments[half:], end=True)
        wait_for(lambda: settled(zk, connection, ["n1"], streams), 120, "failover")
    written = read_sessions(kafka_bootstrap, app, deduplicate=False)
    result = verify_sessions(written, expected_sessions(fragments, WebSessions()), len(fragments))
    print(f"\nat-most-once: {result.line()}")
    assert result.duplicates == 0 and result.extra == 0 and result.conflicting_duplicates == 0
