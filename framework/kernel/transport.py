"""Which Kafka client library a command uses: `--kafka-client auto|confluent|kafka-python`.

kafka-python is the reference transport (pure Python, always installed);
confluent-kafka (librdkafka) is the fast one. `auto` takes confluent-kafka
when it can be imported. Both give the same topics, wire format, delivery
guarantees and errors.
"""

from __future__ import annotations

import importlib.util
from typing import Literal, get_args

from framework.kernel.errors import ConfigError

__all__ = ["KAFKA_CLIENTS", "KafkaClient", "Transport", "resolve_transport"]

KafkaClient = Literal["auto", "confluent", "kafka-python"]
Transport = Literal["confluent", "kafka-python"]
KAFKA_CLIENTS: tuple[str, ...] = get_args(KafkaClient)


def resolve_transport(choice: str) -> Transport:
    """The transport `choice` stands for here; `confluent` without the library is an error."""
    if choice not in KAFKA_CLIENTS:
        raise ConfigError(f"--kafka-client must be one of {', '.join(KAFKA_CLIENTS)}: {choice!r}")
    if choice == "kafka-python":
        return "kafka-python"
    if importlib.util.find_spec("confluent_kafka") is not None:
        return "confluent"
    if choice == "confluent":
        raise ConfigError(
            "--kafka-client confluent: the confluent-kafka package is not installed "
            "(pip install confluent-kafka), or use --kafka-client kafka-python"
        )
    return "kafka-python"
