"""The admin client (kafka-python's `KafkaAdminClient`), raising only the project's exceptions.

Topics are created and described, and brokers probed, through kafka-python's
admin client (the reference client, always installed).  Its creation and its
calls raise `framework.kafka.errors.ClientError` (`TopicExists`,
`InvalidReplication` for those two refusals), mapped in `framework.kafka.errors`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from framework.kafka.errors import CLIENT, ClientError, ClientTimeout, MappedClient
from framework.kafka.kafka_python_keywords import client_keywords

__all__ = ["TIMESTAMP_AHEAD_SETTING", "admin_client", "timestamp_ahead_limit_ms", "wait_writable"]

# What a leader answers for a partition it has not created yet (or a broker whose
# metadata does not list the topic yet): worth asking again until the deadline.
_NOT_YET = frozenset({"NotLeaderForPartitionError", "UnknownTopicOrPartitionError"})
_ASK_AGAIN_S = 0.1
TIMESTAMP_AHEAD_SETTING = "message.timestamp.after.max.ms"
"""How far ahead of its own clock a broker takes a record's timestamp (Kafka 3.6+)."""
_BEFORE_3_6 = "message.timestamp.difference.max.ms"  # either way, before Kafka 3.6
_NO_LIMIT = 1 << 62  # a setting at Long.MAX (Kafka 3's default): no limit


def admin_client(bootstrap: str, properties: Mapping[str, str] | None = None, **extra: Any) -> Any:
    """A `KafkaAdminClient` on `bootstrap` with the user's `properties` (standard names).

    `extra` keywords (`client_id`, `request_timeout_ms`...) go under the user's
    properties; raises `ClientError` when Kafka cannot be reached.
    """
    # Imported here: a confluent-kafka node never loads kafka-python (0.2-0.3 CPU s a start).
    from kafka import KafkaAdminClient

    with CLIENT:
        admin = KafkaAdminClient(
            **client_keywords(
                KafkaAdminClient,
                properties or {},
                bootstrap_servers=bootstrap,
                **extra,
            )
        )
    return MappedClient(admin)


def wait_writable(
    admin: Any, topics: Sequence[str], timeout_s: float, *, partitions: int = 1
) -> None:
    """Return once the leader of each of the first `partitions` of every topic answers for it.

    A KRaft broker lists a new partition's leader before that leader has created
    the partition's log. A producer's first request in that window fails and is
    retried while its next one lands; the broker takes the later sequence as the
    producer's first, and the first request's records are lost with no error
    (KAFKA-15591). A ListOffsets answer means the log exists; raises `ClientTimeout`
    naming the first error when some leader has not answered within `timeout_s`.
    """
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec

    specs = {
        TopicPartition(topic, partition): OffsetSpec.LATEST
        for topic in topics
        for partition in range(partitions)
    }
    if not specs:
        return
    deadline = time.monotonic() + timeout_s
    while True:
        left_ms = max(1, int((deadline - time.monotonic()) * 1000))
        try:
            admin.list_partition_offsets(specs, timeout_ms=left_ms)
            return
        except ClientError as exc:
            if exc.client_class not in _NOT_YET:
                raise
            if time.monotonic() >= deadline:
                raise ClientTimeout(
                    f"{len(specs)} new topics were not writable after {timeout_s:.0f} s "
                    f"({exc.client_class})",
                    str(exc),
                    client_class=exc.client_class,
                ) from exc
        time.sleep(_ASK_AGAIN_S)


def timestamp_ahead_limit_ms(admin: Any, topics: Sequence[str]) -> int | None:
    """The least `message.timestamp.after.max.ms` of `topics` as the brokers apply it (their
    default included; `message.timestamp.difference.max.ms` before Kafka 3.6); None when no
    topic has a limit, or the brokers report neither setting."""
    from kafka.admin import ConfigResource, ConfigResourceType

    wanted = {TIMESTAMP_AHEAD_SETTING: None, _BEFORE_3_6: None}
    resources = [ConfigResource(ConfigResourceType.TOPIC, t, configs=wanted) for t in topics]
    described = admin.describe_configs(resources, config_filter="all").get("topic", {})
    limits = []
    for settings in described.values():
        entry = settings.get(TIMESTAMP_AHEAD_SETTING) or settings.get(_BEFORE_3_6)
        if entry is not None and entry.get("value") is not None:
            limits.append(int(entry["value"]))
    least = min(limits, default=None)
    return None if least is None or least >= _NO_LIMIT else least
