"""`--max-ahead topics`: the bound the stream topics' brokers apply, as DescribeConfigs gives it,
less the clock allowance; Kafka 4's default when the brokers do not say."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

import framework.commands.produce as produce_command
from framework.kafka.admin import timestamp_ahead_limit_ms
from framework.kafka.errors import ClientError
from framework.kernel.config import ConnectionConfig
from router.producer import DEFAULT_MAX_AHEAD_MS
from router.provisioning import CLOCK_ALLOWANCE_MS, max_ahead_for_limit

AHEAD = "message.timestamp.after.max.ms"
EITHER_WAY = "message.timestamp.difference.max.ms"  # before Kafka 3.6
LONG_MAX = str(2**63 - 1)


class DescribingAdmin:
    """An admin client answering DescribeConfigs as kafka-python 3 does (`config_filter="all"`)."""

    def __init__(self, settings: dict[str, dict[str, str]]) -> None:
        self.settings = settings
        self.asked: list[Any] = []

    def describe_configs(self, resources: list[Any], config_filter: str) -> dict[str, Any]:
        self.asked.append((resources, config_filter))
        return {
            "topic": {
                r.name: {key: {"value": value} for key, value in self.settings[r.name].items()}
                for r in resources
            }
        }


@pytest.mark.parametrize(
    ("settings", "limit"),
    [
        ({"a": {AHEAD: "3600000"}, "b": {AHEAD: "600000"}}, 600_000),  # the least of them
        ({"a": {EITHER_WAY: "7200000"}, "b": {EITHER_WAY: "7200000"}}, 7_200_000),  # Kafka 3.5
        ({"a": {EITHER_WAY: LONG_MAX}, "b": {EITHER_WAY: LONG_MAX}}, None),  # Kafka 3's default
        ({"a": {}, "b": {}}, None),  # nothing said
    ],
)
def test_the_limit_is_the_least_the_topics_apply(
    settings: dict[str, dict[str, str]], limit: int | None
) -> None:
    admin = DescribingAdmin(settings)
    assert timestamp_ahead_limit_ms(admin, ["a", "b"]) == limit
    ((resources, config_filter),) = admin.asked
    assert [r.name for r in resources] == ["a", "b"]
    assert config_filter == "all"  # the brokers' defaults included, not only topic overrides


def test_the_bound_leaves_the_clock_allowance_below_the_limit() -> None:
    assert max_ahead_for_limit(None) is None
    assert max_ahead_for_limit(3_600_000) == 3_600_000 - CLOCK_ALLOWANCE_MS == DEFAULT_MAX_AHEAD_MS
    assert max_ahead_for_limit(100_000) == 50_000  # a limit under two allowances: half of it


def test_brokers_that_do_not_say_give_kafka_4s_default_and_a_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def denied(bootstrap: str, topics: list[str], **kwargs: Any) -> int | None:
        raise ClientError("DescribeConfigs on topic a: TopicAuthorizationFailedError")

    monkeypatch.setattr(produce_command, "topics_max_ahead_ms", denied)
    connection = ConnectionConfig("zk:2181", "kafka:9092", "web")
    with capture_logs() as logs:
        bound = produce_command._max_ahead_of_topics(connection, ["web.stream.0000"])
    assert bound == DEFAULT_MAX_AHEAD_MS
    (warning,) = [e for e in logs if e["event"] == "max_ahead_not_read"]
    assert "TopicAuthorizationFailedError" in warning["error"]
    assert "--max-ahead" in warning["hint"] and warning["max_ahead_s"] == 3_540
