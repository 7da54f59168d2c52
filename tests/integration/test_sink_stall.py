"""A sink that cannot deliver for long: the sessions topic deleted under a running node.

The cluster does not create topics on demand, so with the topic gone every send
of the node fails until it is created again.  Past `--sink-stall-timeout` the node
must say so once (`sink_stalled`, naming the topic) and answer `/readyz` with 503
while staying alive and in its streams; once the topic is back, output flows again
(`sink_recovered`, `/readyz` 200) and nothing is lost: the sessions written before
the deletion plus those written after it are exactly the batch definition's.

kafka-python's producer never delivers to a topic deleted and created again (a
fresh one does at once), so this also shows the sink replacing a producer that
could not deliver (`sink_producer_replaced`) and closing the stuck one cleanly.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka.admin import KafkaAdminClient

from framework.kernel.config import ConnectionConfig
from framework.kernel.zookeeper import zookeeper_client
from framework.provision import provision_streams
from framework.sessions import read_sessions
from framework.testing.members import wait_for
from framework.testing.metrics import http_get
from framework.testing.nodes import NodeGroup, node_story, settled_alive, streams_of
from framework.testing.traffic import produce
from framework.verify import expected_sessions, verify_sessions
from router.generator import generate_fragments
from router.naming import sessions_topic
from sessionizer.examples.weblog import WebSessions

pytestmark = pytest.mark.integration
STREAMS = 4
WEBLOG = "sessionizer.examples.weblog:WebSessions"


def _delete_topic(bootstrap: str, topic: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="test-sink-stall")
    try:
        admin.delete_topics([topic], timeout_ms=30_000)
    finally:
        admin.close()


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_a_deleted_sessions_topic_stalls_the_sink_visibly_and_nothing_is_lost(
    zk_hosts: str, kafka_bootstrap: str, app: str, tmp_path: Path, client: str
) -> None:
    connection = ConnectionConfig(zk_hosts, kafka_bootstrap, app)
    provision_streams(connection, STREAMS)
    fragments = list(generate_fragments(900, seed=41))
    half = len(fragments) // 2
    topic = sessions_topic(app)
    streams = streams_of(app, STREAMS)
    with NodeGroup(connection, tmp_path, WEBLOG) as group, zookeeper_client(zk_hosts) as zk:
        node = group.start(
            "n1", "--kafka-client", client, "--metrics-port", "0",
            "--delivery-timeout", "2", "--sink-stall-timeout", "6",
        )  # fmt: skip
        port = int(wait_for(lambda: node.events("metrics_serving"), 60, "metrics")[0]["port"])
        produce(connection, STREAMS, fragments[:half], end=False)
        wait_for(lambda: settled_alive(zk, connection, group, ["n1"], streams), 90, "catch-up")
        before = read_sessions(kafka_bootstrap, app, deduplicate=False)
        assert before, "sessions must have been written before the deletion"

        _delete_topic(kafka_bootstrap, topic)
        produce(connection, STREAMS, fragments[half:], end=True)  # its sessions have nowhere to go
        try:
            stalled = wait_for(lambda: node.events("sink_stalled"), 120, "sink_stalled")
            status, why = wait_for(
                lambda: (answer := http_get(port, "/readyz"))[0] == 503 and answer,
                30,
                "/readyz 503",
            )
        except TimeoutError:
            print(f"node events:\n{node_story(group)}")
            raise
        wait_for(
            lambda: 'sessionizer_sink_stalled{node="n1"} 1.0' in http_get(port, "/metrics")[1],
            30,
            "the sink_stalled gauge at 1",
        )
        print(f"\n{stalled[0]}\n/readyz: {status} {why.strip()}")
        assert "sink stalled" in why and topic in stalled[0]["error"] + why
        assert group.running() == ["n1"], "a stalled sink must not end the node"

        provision_streams(connection, STREAMS)  # creates the missing sessions topic again
        wait_for(lambda: node.events("sink_recovered"), 120, "sink_recovered")
        wait_for(lambda: http_get(port, "/readyz")[0] == 200, 60, "/readyz 200 again")
        wait_for(  # published once a second: it may trail /readyz by that much
            lambda: 'sessionizer_sink_stalled{node="n1"} 0.0' in http_get(port, "/metrics")[1],
            30,
            "the sink_stalled gauge back at 0",
        )
        wait_for(lambda: settled_alive(zk, connection, group, ["n1"], streams), 120, "recovery")
        assert len(node.events("sink_stalled")) == 1
        assert node.events("sink_producer_replaced"), "the stuck producer must have been replaced"
        assert node.events("client_close_failed") == [], "a replaced producer must close cleanly"
    after = read_sessions(kafka_bootstrap, app, deduplicate=False)
    result = verify_sessions(
        before + after, expected_sessions(fragments, WebSessions()), len(fragments)
    )
    print(result.line())
    assert result.exact, result
