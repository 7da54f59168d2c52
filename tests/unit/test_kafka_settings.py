"""One properties file, by the standard names, reaches every client in its own dialect."""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

from framework.kafka.kafka_python import producer_settings
from framework.kafka.kafka_python_keywords import client_keywords
from framework.kernel.client_settings import RESERVED_PROPERTIES, read_kafka_properties, redacted
from framework.kernel.config import ConnectionConfig
from framework.kernel.errors import ConfigError
from framework.kernel.kafka_settings import (
    java_client_settings,
    kafka_python_config,
    kafka_python_settings,
)

SECURE = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "node",
    "sasl.password": 's3cr"et',
    "ssl.ca.location": "/certs/ca.pem",
    "ssl.endpoint.identification.algorithm": "none",
}


def test_kafka_python_gets_its_keywords() -> None:
    settings = kafka_python_settings(SECURE, KafkaConsumer.DEFAULT_CONFIG)
    assert settings == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "node",
        "sasl_plain_password": 's3cr"et',
        "ssl_cafile": "/certs/ca.pem",
        "ssl_check_hostname": False,
    }
    assert kafka_python_settings({"request.timeout.ms": "5000"}, KafkaProducer.DEFAULT_CONFIG) == {
        "request_timeout_ms": 5000
    }


def test_a_property_kafka_python_cannot_take_is_a_clear_error() -> None:
    with pytest.raises(ConfigError, match=r"queue\.buffering\.max\.kbytes"):
        kafka_python_settings({"queue.buffering.max.kbytes": "1"}, KafkaProducer.DEFAULT_CONFIG)


def test_a_property_of_another_kafka_python_client_is_left_to_that_client() -> None:
    # One --kafka-config file reaches a node's consumer and its producers: a consumer's
    # `fetch.max.bytes` stopped the node, the producer refusing it (librdkafka and the
    # Java client leave another client's property to that client, and so does this).
    both = {"fetch.max.bytes": "16777216", "linger.ms": "5"}
    assert client_keywords(KafkaConsumer, both, client_id="n1") == {
        "client_id": "n1",
        "fetch_max_bytes": 16777216,
    }
    assert producer_settings(both) == {"linger_ms": 5}  # the node's sink, `StreamProducer`
    assert client_keywords(KafkaAdminClient, both) == {}
    with pytest.raises(ConfigError, match=r"fetch\.max\.byte'"):  # a typo is no client's
        client_keywords(KafkaConsumer, {"fetch.max.byte": "1"})


def test_the_java_client_gets_a_jaas_line_and_a_pem_truststore() -> None:
    settings = java_client_settings(SECURE)
    assert settings["sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="node" password="s3cr\\"et";'
    )
    assert settings["ssl.truststore.type"] == "PEM"
    assert settings["ssl.truststore.location"] == "/certs/ca.pem"
    assert "sasl.password" not in settings and "sasl.username" not in settings


def test_a_properties_file_is_read_and_secrets_never_show(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "client.properties"
    path.write_text("# secured\nsecurity.protocol=SASL_SSL\nsasl.password = hunter2\n\n")
    properties = read_kafka_properties(path)
    assert properties == {"security.protocol": "SASL_SSL", "sasl.password": "hunter2"}
    assert redacted(properties)["sasl.password"] == "***"
    connection = ConnectionConfig("zk:1", "k:1", kafka_config=properties, zk_auth="digest:u:pw")
    assert "hunter2" not in repr(connection) and "pw" not in repr(connection)
    path.write_text("no equals sign here\n")
    with pytest.raises(ConfigError, match="line 1"):
        read_kafka_properties(path)


def test_the_users_properties_win_over_the_projects_defaults() -> None:
    config = kafka_python_config(
        {"client.id": "mine", "request.timeout.ms": "40000"},
        KafkaConsumer.DEFAULT_CONFIG,
        client_id="sessionizer-status",
        group_id=None,
    )
    assert config == {"client_id": "mine", "request_timeout_ms": 40000, "group_id": None}


@pytest.mark.parametrize("name", sorted(RESERVED_PROPERTIES))
def test_a_reserved_property_is_refused_from_python_too(name: str) -> None:
    with pytest.raises(ConfigError, match=f"'{name}' is set by sessionizer itself"):
        ConnectionConfig("zk:2181", "kafka:9092", kafka_config={name: "x"})
