"""Kafka client properties, by their standard names, for each client the project makes.

Users write one properties file with the names librdkafka and the Java client
share (`security.protocol`, `sasl.mechanism`, `sasl.username`,
`sasl.password`, `ssl.ca.location`, `ssl.certificate.location`,
`ssl.key.location`, `ssl.key.password`, `ssl.endpoint.identification.algorithm`,
and any other client property). confluent-kafka takes them as they are;
kafka-python and Spark's Kafka source (the Java client) get their equivalents
here, in one place. A leaf module (it imports only `framework.kernel.errors`), so
`router` and `sessionizer` use it as they use `framework.kernel.limits`.

Every confluent-kafka client is given `"logger": librdkafka_logger()` in its
config: librdkafka's lines then go through `logging` (and from there through
structlog, `framework.logging`) instead of straight to stderr as `%3|...` text.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from typing import Any

from framework.kernel.errors import ConfigError

__all__ = [
    "LIBRDKAFKA_LOGGER",
    "java_client_settings",
    "kafka_python_config",
    "kafka_python_settings",
    "librdkafka_logger",
]

LIBRDKAFKA_LOGGER = "librdkafka"
"""The `logging` logger every confluent-kafka client the project makes logs to."""

# Standard name -> kafka-python keyword.
_KAFKA_PYTHON = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.crl.location": "ssl_crlfile",
}
_JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def kafka_python_settings(
    properties: Mapping[str, str], accepted: Collection[str], elsewhere: Collection[str] = ()
) -> dict[str, Any]:
    """kafka-python keywords for `properties`, for a client whose config keys are `accepted`.

    One file serves a process's consumer and producers alike: a property only
    another kafka-python client takes (`elsewhere`, such as a consumer's
    `fetch.max.bytes` given to a producer) is left to that client, as librdkafka
    and the Java client do.  A property no client takes is an error naming it,
    rather than a setting silently dropped (a dropped security setting fails
    later, and less clearly).
    """
    settings: dict[str, Any] = {}
    for name, value in properties.items():
        if name == "ssl.endpoint.identification.algorithm":
            settings["ssl_check_hostname"] = value.strip().lower() == "https"
            continue
        keyword = _KAFKA_PYTHON.get(name, name.replace(".", "_"))
        if keyword not in accepted:
            if keyword in elsewhere:
                continue
            raise ConfigError(
                f"Kafka client property {name!r} has no kafka-python equivalent; use "
                "--kafka-client confluent, or remove it from the --kafka-config file"
            )
        settings[keyword] = _typed(value)
    return settings


def kafka_python_config(
    properties: Mapping[str, str],
    accepted: Collection[str],
    elsewhere: Collection[str] = (),
    **defaults: Any,
) -> dict[str, Any]:
    """A kafka-python client's keywords: the project's `defaults`, then the user's `properties`
    (those of `elsewhere` left to the other clients, as in `kafka_python_settings`).

    The user's value wins (a `client.id` of their own, a longer timeout), as it
    does with confluent-kafka; the properties the guarantees rest on cannot be
    in the file at all (`framework.kernel.client_settings.RESERVED_PROPERTIES`).
    """
    return {**defaults, **kafka_python_settings(properties, accepted, elsewhere)}


def librdkafka_logger() -> logging.Logger:
    """The logger for a confluent-kafka client's `"logger"` setting (every client gets it).

    confluent-kafka hands a client's log lines to it from the calls that serve
    the client's queue (`poll`, `consume`, `flush`), in the caller's thread.
    """
    return logging.getLogger(LIBRDKAFKA_LOGGER)


def java_client_settings(properties: Mapping[str, str]) -> dict[str, str]:
    """Java client properties (Spark's `kafka.`-prefixed options) for `properties`."""
    settings = dict(properties)
    username = settings.pop("sasl.username", None)
    password = settings.pop("sasl.password", None)
    mechanism = settings.pop("sasl.mechanisms", None) or settings.get("sasl.mechanism", "")
    if mechanism:
        settings["sasl.mechanism"] = mechanism
    if username is not None and "sasl.jaas.config" not in settings:
        module = _JAAS_MODULES.get(mechanism.upper())
        if module is None:
            raise ConfigError(f"sasl.username with sasl.mechanism {mechanism!r} is not supported")
        user, secret = _quoted(username), _quoted(password or "")
        settings["sasl.jaas.config"] = f'{module} required username="{user}" password="{secret}";'
    ca = settings.pop("ssl.ca.location", None)
    if ca is not None:
        settings.setdefault("ssl.truststore.type", "PEM")
        settings.setdefault("ssl.truststore.location", ca)
    return settings


def _typed(value: str) -> Any:
    """Numbers and booleans as kafka-python expects them; everything else stays a string."""
    lowered = value.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    try:
        return int(value)
    except ValueError:
        return value


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')
