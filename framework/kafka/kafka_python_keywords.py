"""A kafka-python client's keywords, from the one properties file a process's clients share."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from framework.kernel.kafka_settings import kafka_python_config

__all__ = ["client_keywords", "every_client_keyword"]


@cache
def every_client_keyword() -> frozenset[str]:
    """The config keys some kafka-python client takes (consumer, producer or admin)."""
    # Imported at the first use, as every kafka-python client of the layer is: a process on
    # confluent-kafka never loads kafka-python.
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

    return frozenset(KafkaConsumer.DEFAULT_CONFIG).union(
        KafkaProducer.DEFAULT_CONFIG, KafkaAdminClient.DEFAULT_CONFIG
    )


def client_keywords(client: Any, properties: Mapping[str, str], **defaults: Any) -> dict[str, Any]:
    """Keywords for `client` (a kafka-python client class): `defaults`, then the user's
    properties it takes; a property only another client takes is left to that client."""
    return kafka_python_config(
        properties, client.DEFAULT_CONFIG, every_client_keyword(), **defaults
    )
