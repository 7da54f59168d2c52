"""A local cluster is ready when `up` returns: the first producer does not wait on the broker."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable

import pytest
from confluent_kafka import Producer

from framework.cluster import LocalCluster

pytestmark = pytest.mark.integration


def test_an_idempotent_producer_started_as_the_cluster_comes_up_gets_its_id_without_retrying(
    local_cluster: Callable[..., LocalCluster], caplog: pytest.LogCaptureFixture
) -> None:
    """`make demo` printed librdkafka's "Failed to acquire idempotence PID ... Coordinator
    load in progress: retrying" warning: its producer asked before the broker could give
    producer ids."""
    cluster = local_cluster(zookeepers=1, brokers=1)
    logger = logging.getLogger("test-cluster-ready")
    states: list[str] = []
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "enable.idempotence": True,
            "statistics.interval.ms": 50,
            "stats_cb": lambda stats: states.append(json.loads(stats)["eos"]["idemp_state"]),
            "logger": logger,
        }
    )
    caplog.set_level(logging.DEBUG, logger=logger.name)
    deadline = time.monotonic() + 60
    while "Assigned" not in states and time.monotonic() < deadline:
        producer.poll(0.05)
    producer.flush(5)
    assert "Assigned" in states, f"no producer id within 60 s; states {states[-5:]}"
    lines = [r.getMessage() for r in caplog.records if r.name == logger.name]
    assert not [line for line in lines if "PID" in line], lines
