"""The admin client (kafka-python's `KafkaAdminClient`), raising only the project's exceptions.

Topics are created and described, and brokers probed, through kafka-python's
admin client (the reference client, always installed).  Its creation and its
calls raise `framework.kafka.errors.ClientError` (`TopicExists`,
`InvalidReplication` for those two refusals), mapped in `framework.kafka.errors`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka import KafkaAdminClient

from framework.kafka.errors import CLIENT, MappedClient
from framework.kernel.kafka_settings import kafka_python_config

__all__ = ["admin_client"]


def admin_client(bootstrap: str, properties: Mapping[str, str] | None = None, **extra: Any) -> Any:
    """A `KafkaAdminClient` on `bootstrap` with the user's `properties` (standard names).

    `extra` keywords (`client_id`, `request_timeout_ms`...) go under the user's
    properties; raises `ClientError` when Kafka cannot be reached.
    """
    with CLIENT:
        admin = KafkaAdminClient(
            **kafka_python_config(
                properties or {},
                KafkaAdminClient.DEFAULT_CONFIG,
                bootstrap_servers=bootstrap,
                **extra,
            )
        )
    return MappedClient(admin)
