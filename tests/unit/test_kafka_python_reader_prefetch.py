"""The node's kafka-python reader fetches at most 4 MiB at a time; a user's property still wins.

At kafka-python's default (50 MiB per fetch response) a node that was behind its streams
peaked at 250-270 MB resident, with 93,000-103,000 minor faults per 1,000,000 fragments,
and its loop waited 0.3 s for a response once a run (benchmarks/HOT_PATH.md, round 16).
"""

from __future__ import annotations

from typing import Any

import kafka
import pytest

from framework.kafka.kafka_python_reader import KafkaPythonReader


class SettingsSeen:
    """kafka-python's `KafkaConsumer` as far as the reader's start needs it; keeps its
    keywords."""

    DEFAULT_CONFIG = kafka.KafkaConsumer.DEFAULT_CONFIG
    made: list[dict[str, Any]] = []

    def __init__(self, **settings: Any) -> None:
        SettingsSeen.made.append(settings)


@pytest.fixture
def settings_seen(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    SettingsSeen.made = []
    monkeypatch.setattr(kafka, "KafkaConsumer", SettingsSeen)
    return SettingsSeen.made


def test_a_fetch_is_bounded(settings_seen: list[dict[str, Any]]) -> None:
    KafkaPythonReader("k:9092", client_id="n1")

    (settings,) = settings_seen
    assert settings["fetch_max_bytes"] == 4 * 1024 * 1024
    assert settings["auto_offset_reset"] == "none"  # never moved silently (DESIGN section 7)


def test_a_users_fetch_property_wins(settings_seen: list[dict[str, Any]]) -> None:
    KafkaPythonReader("k:9092", client_id="n1", properties={"fetch.max.bytes": "52428800"})

    assert settings_seen[0]["fetch_max_bytes"] == 52428800
