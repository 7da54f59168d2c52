"""Cluster faults while producing and provisioning: broker loss, ZooKeeper server loss."""

from __future__ import annotations

import socket
from collections import Counter
from collections.abc import Callable
from itertools import islice
from pathlib import Path

import pytest

from framework.cluster import LocalCluster
from framework.cluster.kafka_server import broker_ids_serving
from framework.kernel.watermark import Watermark
from framework.testing.cli import cli_json
from router.generator import generate_fragments
from router.naming import stream_name
from router.producer import ProducerConfig, StreamProducer
from router.readback import read_topics
from router.wire import decode_record, encode_fragment

pytestmark = pytest.mark.integration


def test_broker_killed_and_restarted_during_production_loses_nothing_acknowledged(
    local_cluster: Callable[..., LocalCluster], app: str
) -> None:
    cluster = local_cluster(zookeepers=1, brokers=3)
    conn = {"zk": cluster.zk_connect, "bootstrap": cluster.bootstrap, "app": app}
    cli_json("streams", "create", "--count", "4", "--replication", "3", **conn)
    fragments = list(generate_fragments(400, seed=3))
    half = len(fragments) // 2

    producer = StreamProducer(ProducerConfig(cluster.bootstrap, app, 4))
    try:
        for fragment in islice(fragments, half):
            producer.send(fragment)
        cluster.kill("kafka2")  # mid-stream: records of the first half may still be in flight
        for fragment in islice(fragments, half, None):
            producer.send(fragment)
        producer.flush(timeout=120)
        cluster.start("kafka2")
    finally:
        producer.close()
    assert producer.stats.sent == len(fragments)  # every fragment was acknowledged

    records = read_topics(cluster.bootstrap, [stream_name(app, i) for i in range(4)])
    read = Counter()
    for batch in records.values():
        for r in batch:
            item = decode_record(r.key, r.value, r.headers, r.timestamp)
            if not isinstance(item, Watermark):
                read[(r.key, r.value, r.timestamp)] += 1
    expected = Counter((*encode_fragment(f), f.timestamp_ms) for f in fragments)
    assert read == expected  # none lost; the idempotent producer adds no duplicate


def test_streams_create_works_with_one_zookeeper_server_down(
    local_cluster: Callable[..., LocalCluster], app: str
) -> None:
    cluster = local_cluster(zookeepers=3, brokers=1)
    leader = cluster.zk_leader()
    assert leader is not None
    cluster.kill(leader)
    created = cli_json(
        "streams", "create", "--count", "8",
        zk=cluster.zk_connect, bootstrap=cluster.bootstrap, app=app,
    )  # fmt: skip
    # + sessions, deadletter, handover, state
    assert created == {"app": app, "streams": 8, "created": 12}


def test_cluster_starts_on_new_ports_when_a_chosen_port_is_taken_before_it_binds(
    tmp_path: Path,
) -> None:
    cluster = LocalCluster(tmp_path / "cluster", zookeepers=1, brokers=1)
    chosen = cluster.bootstrap
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        # What another process's socket does between the port being chosen and Kafka binding it.
        squatter.bind(("127.0.0.1", int(chosen.rsplit(":", 1)[1])))
        squatter.listen()
        with cluster:
            assert cluster.bootstrap != chosen
            assert broker_ids_serving(cluster.bootstrap) == {1}
