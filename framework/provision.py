"""Provision an app's streams: Kafka topics first, then the ZooKeeper registry."""

from __future__ import annotations

from framework.config import ConnectionConfig
from framework.zookeeper import zookeeper_client
from router.provisioning import TopicPlan, create_stream_topics
from router.registry import check_stream_count, register_streams

__all__ = ["provision_streams"]


def provision_streams(connection: ConnectionConfig, count: int, replication: int = 1) -> int:
    """Create the topics and register the streams (idempotent); return topics newly created.

    The recorded count is checked before Kafka is touched, so a mismatch changes
    nothing; the registry is written last, so a node never sees a stream whose
    topic does not exist.
    """
    plan = TopicPlan(connection.app, count, replication)
    registry = connection.paths.active_streams
    with zookeeper_client(connection.zk) as client:
        check_stream_count(client, registry, connection.app, count)
        created = create_stream_topics(connection.bootstrap, plan)
        register_streams(client, registry, connection.app, plan.stream_topics())
    return len(created)
