"""Which Kafka client library a command uses: `--kafka-client auto|confluent|kafka-python`.

kafka-python is the reference transport (pure Python, always installed);
confluent-kafka (librdkafka) is the fast one. `auto` takes confluent-kafka
when it is installed at `CONFLUENT_MINIMUM` or later. Both give the same
topics, wire format, delivery guarantees and errors.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from importlib import metadata
from typing import Literal, get_args

import structlog

from framework.kernel.errors import ConfigError

__all__ = [
    "CONFLUENT_MINIMUM",
    "KAFKA_CLIENTS",
    "KafkaClient",
    "Transport",
    "installed_confluent_version",
    "resolve_transport",
]

KafkaClient = Literal["auto", "confluent", "kafka-python"]
Transport = Literal["confluent", "kafka-python"]
KAFKA_CLIENTS: tuple[str, ...] = get_args(KafkaClient)
CONFLUENT_MINIMUM = (2, 16)
"""Older librdkafka aborts the process (SIGABRT, `rd_kafka_assignment_partition_stopped:
Assertion rktp->rktp_started failed`) when a reader is reassigned while a removal is still
pending, as a node's reader is at each rebalance (confluentinc/librdkafka#5573)."""

_log = structlog.get_logger("sessionizer.transport")


def resolve_transport(choice: str) -> Transport:
    """The transport `choice` stands for here; `confluent` without the library is an error."""
    if choice not in KAFKA_CLIENTS:
        raise ConfigError(f"--kafka-client must be one of {', '.join(KAFKA_CLIENTS)}: {choice!r}")
    if choice == "kafka-python":
        return "kafka-python"
    if importlib.util.find_spec("confluent_kafka") is not None:
        too_old = _confluent_too_old()
        if too_old is None:
            return "confluent"
        if choice == "confluent":
            raise ConfigError(f"--kafka-client confluent: {too_old}")
        _warn_falling_back(too_old)
        return "kafka-python"
    if choice == "confluent":
        raise ConfigError(
            "--kafka-client confluent: the confluent-kafka package is not installed "
            "(pip install confluent-kafka), or use --kafka-client kafka-python"
        )
    return "kafka-python"


def _confluent_too_old() -> str | None:
    """Why the installed confluent-kafka must not be used, or None when it may."""
    version = installed_confluent_version()
    if version is None:
        return None  # importable without package metadata (not pip-installed): cannot tell
    found = tuple(int(part) for part in re.findall(r"\d+", version)[:2])
    if found >= CONFLUENT_MINIMUM:
        return None
    wanted = ".".join(map(str, CONFLUENT_MINIMUM))
    return (
        f"confluent-kafka {version} is installed; before {wanted} its librdkafka aborts the "
        "process when a reader's streams change while a previous change is still being "
        f"applied (confluentinc/librdkafka#5573): pip install 'confluent-kafka>={wanted}', "
        "or use --kafka-client kafka-python"
    )


@functools.cache
def installed_confluent_version() -> str | None:
    """The installed confluent-kafka's version; None when its metadata cannot be read."""
    try:
        return metadata.version("confluent-kafka")
    except metadata.PackageNotFoundError:
        return None


@functools.cache
def _warn_falling_back(reason: str) -> None:
    """Once per process: `auto` chose kafka-python over a confluent-kafka it must not use."""
    _log.warning("kafka_client_fallback", chosen="kafka-python", reason=reason)
