"""Provisioning returns only when every new topic takes writes at its leader.

A KRaft broker lists a new partition with its leader before it has created the
partition's log. A producer's first request in that window fails and is retried,
while its next one may already land; the broker then takes the later sequence as
the producer's first, and the first request's records are lost without an error
(KAFKA-15591). This happened in CI: the first four records of one stream, right
after `provision_streams`.
"""

from __future__ import annotations

import pytest
from kafka import TopicPartition
from kafka.admin import KafkaAdminClient, OffsetSpec

from router.provisioning import TopicPlan, create_stream_topics, grow_stream_topics

pytestmark = pytest.mark.integration


def _every_leader_answers_at_once(bootstrap: str, topics: list[str]) -> None:
    """One ListOffsets per leader, no retry: it fails for a partition the leader has no log of."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        specs = {TopicPartition(topic, 0): OffsetSpec.LATEST for topic in topics}
        offsets = admin.list_partition_offsets(specs, timeout_ms=1)
    finally:
        admin.close()
    assert sorted(tp.topic for tp in offsets) == sorted(topics)
    assert {o.offset for o in offsets.values()} == {0}


def test_created_topics_take_writes_when_create_returns(kafka_bootstrap: str, app: str) -> None:
    plan = TopicPlan(app, 64)
    created = create_stream_topics(kafka_bootstrap, plan)
    assert created == plan.all_topics()
    _every_leader_answers_at_once(kafka_bootstrap, created)


def test_grown_topics_take_writes_when_grow_returns(kafka_bootstrap: str, app: str) -> None:
    create_stream_topics(kafka_bootstrap, TopicPlan(app, 4))
    grown = grow_stream_topics(kafka_bootstrap, TopicPlan(app, 68))
    assert len(grown) == 64
    _every_leader_answers_at_once(kafka_bootstrap, grown)
