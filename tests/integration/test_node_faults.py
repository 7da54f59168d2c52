"""Nodes under faults: a paused node is fenced, servers die mid-run, members churn, poison input."""

from __future__ import annotations

import signal
from collections.abc import Callable
from itertools import islice
from pathlib import Path

import msgpack
import pytest
from kafka import KafkaProducer

from framework.cluster import LocalCluster
from framework.kernel.config import ConnectionConfig
from framework.kernel.zookeeper import zookeeper_client
from framework.provision import provision_streams
from framework.sessions import read_sessions
from framework.testing.members import balanced, wait_for
from framework.testing.nodes import (
    NodeGroup,
    StateObserver,
    node_story,
    progress_lines,
    settled,
    streams_of,
)
from framework.testing.traffic import produce
from framework.verify import expected_sessions, verify_sessions
from router.fragment import ParsedFragment
from router.generator import generate_fragments
from router.naming import deadletter_topic, stream_name
from router.readback import read_topics
from sessionizer.examples.weblog import WebSessions

pytestmark = pytest.mark.integration
WEBLOG = "sessionizer.examples.weblog:WebSessions"


def _assert_exact(connection: ConnectionConfig, fragments: list) -> None:
    written = read_sessions(connection.bootstrap, connection.app, deduplicate=False)
    result = verify_sessions(written, expected_sessions(fragments, WebSessions()), len(fragments))
    print(f"\n{result.line()}")
    assert result.exact, result


def test_a_paused_node_is_fenced_and_cannot_move_state_backwards(
    zk_hosts: str, kafka_bootstrap: str, app: str, tmp_path: Path
) -> None:
    connection = ConnectionConfig(zk_hosts, kafka_bootstrap, app)
    provision_streams(connection, 16)
    streams = streams_of(app, 16)
    fragments = list(generate_fragments(1500, seed=11))
    third = len(fragments) // 3
    with (
        NodeGroup(connection, tmp_path, WEBLOG, session_timeout=3.0) as group,
        zookeeper_client(zk_hosts) as zk,
        StateObserver(connection, streams) as observer,
    ):
        for node in ("n1", "n2", "n3"):
            group.start(node)
        produce(connection, 16, fragments[:third], end=False)
        wait_for(lambda: settled(zk, connection, ["n1", "n2", "n3"], streams), 120, "catch-up")

        paused = group.nodes["n2"]
        paused.send(signal.SIGSTOP)  # past its session timeout: the others take its streams
        produce(connection, 16, fragments[third : 2 * third], end=False)
        wait_for(lambda: settled(zk, connection, ["n1", "n3"], streams), 120, "takeover")
        paused.send(signal.SIGCONT)  # wakes up believing it still owns its streams
        produce(connection, 16, fragments[2 * third :], end=True)
        wait_for(lambda: settled(zk, connection, ["n1", "n2", "n3"], streams), 120, "rejoin")
        gave_up = paused.events("stream_fenced") + paused.events("streams_lost")
    assert gave_up, "the paused node never noticed it had lost its streams"
    assert observer.snapshots > 0 and observer.violations == []
    _assert_exact(connection, fragments)


def test_broker_restart_and_zookeeper_server_loss_mid_run(
    local_cluster: Callable[..., LocalCluster], app: str, tmp_path: Path
) -> None:
    cluster = local_cluster(zookeepers=3, brokers=1)
    connection = ConnectionConfig(cluster.zk_connect, cluster.bootstrap, app)
    provision_streams(connection, 8)
    streams = streams_of(app, 8)
    fragments = list(generate_fragments(1200, seed=5))
    quarter = len(fragments) // 4
    with (
        NodeGroup(connection, tmp_path, WEBLOG, session_timeout=6.0) as group,
        zookeeper_client(cluster.zk_connect) as zk,
    ):
        for node in ("n1", "n2"):
            group.start(node)
        produce(connection, 8, fragments[:quarter], end=False)
        wait_for(lambda: settled(zk, connection, ["n1", "n2"], streams), 120, "catch-up")
        cluster.restart("kafka1")
        produce(connection, 8, fragments[quarter : 2 * quarter], end=False)
        leader = cluster.zk_leader()
        assert leader is not None
        cluster.kill(leader)
        produce(connection, 8, fragments[2 * quarter :], end=True)
        try:
            wait_for(lambda: settled(zk, connection, ["n1", "n2"], streams), 180, "recovery")
        except TimeoutError:
            print(f"node events:\n{node_story(group)}")
            print(f"streams:\n{progress_lines(zk, connection, streams)}")
            raise
        assert group.running() == ["n1", "n2"]  # rode it out, no crash
    _assert_exact(connection, fragments)


def test_members_join_and_die_while_traffic_flows(
    zk_hosts: str, kafka_bootstrap: str, app: str, tmp_path: Path
) -> None:
    connection = ConnectionConfig(zk_hosts, kafka_bootstrap, app)
    provision_streams(connection, 64)
    streams = streams_of(app, 64)
    fragments = list(generate_fragments(2500, seed=2))
    chunks = iter([fragments[i : i + 2000] for i in range(0, len(fragments), 2000)])
    steps: list[tuple[str, str]] = [
        ("start", "n4"), ("start", "n5"), ("kill", "n2"), ("start", "n6"),
        ("term", "n4"), ("kill", "n5"),
    ]  # fmt: skip
    with (
        NodeGroup(connection, tmp_path, WEBLOG, session_timeout=3.0) as group,
        zookeeper_client(zk_hosts) as zk,
    ):
        alive = ["n1", "n2", "n3"]
        for node in alive:
            group.start(node)
        for action, node in steps:
            if action == "start":
                group.start(node)
                alive.append(node)
            else:
                stopped = group.nodes[node]
                stopped.send(signal.SIGKILL if action == "kill" else signal.SIGTERM)
                alive.remove(node)
            # Traffic flows while the group rebalances.
            produce(connection, 64, list(islice(next(chunks, []), 2000)), end=False)
            if action != "start":
                stopped.wait(timeout=60)  # gone, not just signalled: it must not be counted
            # A quiet point: every stream owned once by the nodes alive, spread <= 1.
            live = sorted(alive)
            wait_for(lambda live=live: balanced(zk, connection.paths, live, 64), 120, "balance")
        produce(connection, 64, [f for chunk in chunks for f in chunk], end=True)
        wait_for(lambda: settled(zk, connection, group.running(), streams), 180, "catch-up")
    _assert_exact(connection, fragments)


def test_poison_input_goes_to_dead_letters_and_the_stream_goes_on(
    zk_hosts: str, kafka_bootstrap: str, app: str, tmp_path: Path
) -> None:
    connection = ConnectionConfig(zk_hosts, kafka_bootstrap, app)
    provision_streams(connection, 2)
    clean = list(generate_fragments(200, seed=9))
    start = clean[0].timestamp_ms
    poison = ParsedFragment("203.0.113.9|poison", start + 1, {**clean[0].fields, "path": "/poison"})
    garbage = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    try:
        garbage.send(stream_name(app, 0), key=b"k", value=b"\xc1 not msgpack", partition=0)
        garbage.send(stream_name(app, 1), key=b"\xff\xfe", value=msgpack.packb({}), partition=0)
        garbage.flush()
    finally:
        garbage.close()
    produce(connection, 2, [poison, *clean], end=True)
    processor = "framework.testing.processors:FragileWebSessions"
    with NodeGroup(connection, tmp_path, processor) as group, zookeeper_client(zk_hosts) as zk:
        group.start("n1")
        wait_for(lambda: settled(zk, connection, ["n1"], streams_of(app, 2)), 120, "catch-up")
        assert group.running() == ["n1"]
    letters = read_topics(kafka_bootstrap, [deadletter_topic(app)])[deadletter_topic(app)]
    reasons = sorted(dict(r.headers)["reason"].decode() for r in letters)
    assert reasons == ["hook:update", "key-not-utf8", "not-msgpack"]
    assert any(r.value == b"\xc1 not msgpack" for r in letters)  # original bytes kept
    _assert_exact(connection, clean)
