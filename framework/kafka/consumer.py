"""The readers' consumer: kafka-python's `KafkaConsumer` for manual assignment.

Its calls raise the project's exceptions (`ClientError` and its subclasses,
mapped in `framework.kafka.errors`), never kafka-python's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from framework.kafka.errors import CLIENT, MappedClient
from framework.kafka.kafka_python_keywords import client_keywords

__all__ = ["assigned_consumer", "partition_zero"]


def assigned_consumer(
    bootstrap: str, client_id: str, properties: Mapping[str, str] | None = None, **extra: Any
) -> Any:
    """A kafka-python `KafkaConsumer` for `assign` + `seek`: no group, nothing auto-committed.

    Every reader of the project's topics is one of these (the node's source, status,
    read-back, the handover reader); `extra` keywords and then the user's properties
    go on top.  Its creation and its calls raise `ClientError`, not kafka-python's errors.
    """
    # Imported at the first use: a process on confluent-kafka (a node, the CLI) never loads
    # kafka-python, 0.2-0.4 s of start-up on this project's machines.
    from kafka import KafkaConsumer

    with CLIENT:
        consumer = KafkaConsumer(
            **client_keywords(
                KafkaConsumer,
                properties or {},
                bootstrap_servers=bootstrap,
                group_id=None,
                enable_auto_commit=False,
                client_id=client_id,
                **extra,
            )
        )
    return MappedClient(consumer)


def partition_zero(topic: str) -> Any:
    """The (only) partition of one of the project's single-partition topics."""
    from kafka import TopicPartition

    return TopicPartition(topic, 0)
