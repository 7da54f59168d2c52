"""The node's confluent reader bounds librdkafka's prefetch; a user's property still wins.

librdkafka's default (64 MiB queued, 50 MiB fetches) had a node that was behind its
streams hold 800 MB and fault in a fresh page for every few records fetched; at the
smaller bound, librdkafka's default 1 s pause of a partition over it left the loop
waiting for records (benchmarks/HOT_PATH.md, round 15).
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Consumer

from framework.kafka import confluent_reader
from framework.kafka.confluent_reader import ConfluentReader


class SettingsSeen:
    """librdkafka's `Consumer` as far as the reader's start needs it; keeps its settings."""

    made: list[dict[str, Any]] = []

    def __init__(self, settings: dict[str, Any]) -> None:
        SettingsSeen.made.append(settings)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> None:
        return None


@pytest.fixture
def settings_seen(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    SettingsSeen.made = []
    monkeypatch.setattr(confluent_reader, "Consumer", SettingsSeen)
    return SettingsSeen.made


def test_the_prefetch_is_bounded_and_librdkafka_accepts_the_settings(
    settings_seen: list[dict[str, Any]],
) -> None:
    ConfluentReader("k:9092", client_id="n1")

    (settings,) = settings_seen
    assert settings["queued.max.messages.kbytes"] == 16 * 1024
    assert settings["fetch.queue.backoff.ms"] == 100  # not librdkafka's 1 s: the loop ran dry
    assert "fetch.max.bytes" not in settings  # librdkafka derives it from the bound
    # The real client takes them (it checks its properties as it is made, unconnected).
    Consumer({k: v for k, v in settings.items() if k not in ("logger", "error_cb")}).close()


def test_a_users_prefetch_property_wins(settings_seen: list[dict[str, Any]]) -> None:
    ConfluentReader("k:9092", client_id="n1", properties={"queued.max.messages.kbytes": "65536"})

    assert settings_seen[0]["queued.max.messages.kbytes"] == "65536"
