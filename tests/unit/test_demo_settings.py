"""`sessionizer demo` gives --kafka-client and --kafka-config to every client it makes or starts."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from framework.cli import build_parser
from framework.commands.demo import plan_from_args
from framework.commands.options import connection_from_args
from framework.demo_story import (
    NODE_PROPERTIES,
    aggregate_job,
    demo_connection,
    node_client_flags,
    producer_config,
)
from framework.kernel.client_settings import read_kafka_properties
from framework.kernel.errors import ConfigError

PROPERTIES = {"client.id": "demo-tuned", "request.timeout.ms": "45000", "sasl.password": "s3cret"}


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("SESSIONIZER_KAFKA_CONFIG", "SESSIONIZER_KAFKA_CLIENT"):
        monkeypatch.delenv(variable, raising=False)


def _properties_file(directory: Path) -> Path:
    path = directory / "client.properties"
    path.write_text("# tuned\n" + "".join(f"{k}={v}\n" for k, v in PROPERTIES.items()))
    return path


def test_the_demo_passes_the_kafka_settings_to_every_client(tmp_path: Path) -> None:
    argv = ["demo", "--dir", str(tmp_path), "--kafka-client", "kafka-python"]
    args = build_parser().parse_args([*argv, "--kafka-config", str(_properties_file(tmp_path))])
    plan = plan_from_args(args)
    assert (plan.kafka_client, dict(plan.kafka_config)) == ("kafka-python", PROPERTIES)
    assert "s3cret" not in repr(plan)

    connection = demo_connection(plan, "127.0.0.1:2181", "127.0.0.1:9092")
    assert (connection.app, connection.kafka_client) == ("demo", "kafka-python")
    assert dict(connection.kafka_config) == PROPERTIES  # topics, status, read-back use it
    producer = producer_config(connection, streams=4)
    assert (producer.kafka_client, dict(producer.kafka_config)) == ("kafka-python", PROPERTIES)
    settings = producer.kafka_settings()
    assert (settings["client_id"], settings["request_timeout_ms"]) == ("demo-tuned", 45000)
    job = aggregate_job(connection, tmp_path / "aggregates")
    assert dict(job.kafka_config) == PROPERTIES  # Spark's Kafka source

    nodes = tmp_path / "nodes"
    nodes.mkdir()
    flags = node_client_flags(connection, nodes)
    path = nodes / NODE_PROPERTIES
    assert flags == ["--kafka-client", "kafka-python", "--kafka-config", str(path)]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # it holds the password
    assert not any("s3cret" in flag for flag in flags)  # a path on the command line, no secret
    # What a node makes of those flags is the demo's own connection.
    node_args = build_parser().parse_args(
        ["node", "--processor", "m:C", "--zk", connection.zk, "--bootstrap", "b:1", *flags]
    )
    node_connection = connection_from_args(node_args)
    assert node_connection.kafka_client == "kafka-python"
    assert dict(node_connection.kafka_config) == PROPERTIES == read_kafka_properties(path)


def test_without_kafka_settings_the_nodes_get_the_client_library_only(tmp_path: Path) -> None:
    plan = plan_from_args(build_parser().parse_args(["demo", "--dir", str(tmp_path)]))
    assert (plan.kafka_client, dict(plan.kafka_config)) == ("auto", {})
    connection = demo_connection(plan, "127.0.0.1:2181", "127.0.0.1:9092")
    assert node_client_flags(connection, tmp_path) == ["--kafka-client", "auto"]
    assert not (tmp_path / NODE_PROPERTIES).exists()
    assert dict(producer_config(connection, streams=2).kafka_config) == {}


def test_a_missing_kafka_config_fails_before_any_server_starts(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        ["demo", "--dir", str(tmp_path), "--kafka-config", str(tmp_path / "absent.properties")]
    )
    with pytest.raises(ConfigError, match=r"--kafka-config .*absent\.properties: cannot read it"):
        plan_from_args(args)
