"""The admin client (kafka-python's `KafkaAdminClient`) and the library errors callers catch.

Topics are created and described, and brokers probed, through kafka-python's
admin client (the reference client, always installed). `KafkaPythonError` and
its two subclasses below are what an admin client or an `assigned_consumer`
raises; callers above the layer name them from here, never from the library.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka import KafkaAdminClient
from kafka.errors import InvalidReplicationFactorError, KafkaError, TopicAlreadyExistsError

from framework.kernel.kafka_settings import kafka_python_config

__all__ = [
    "InvalidReplicationFactorError",
    "KafkaPythonError",
    "TopicAlreadyExistsError",
    "admin_client",
]

KafkaPythonError = KafkaError
"""The root of every exception a kafka-python client raises."""


def admin_client(bootstrap: str, properties: Mapping[str, str] | None = None, **extra: Any) -> Any:
    """A `KafkaAdminClient` on `bootstrap` with the user's `properties` (standard names).

    `extra` keywords (`client_id`, `request_timeout_ms`...) go under the user's
    properties; raises `KafkaPythonError` when Kafka cannot be reached.
    """
    return KafkaAdminClient(
        **kafka_python_config(
            properties or {}, KafkaAdminClient.DEFAULT_CONFIG, bootstrap_servers=bootstrap, **extra
        )
    )
