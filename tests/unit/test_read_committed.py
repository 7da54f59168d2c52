"""Every reader of `<app>.sessions` asks for committed records only, whatever the delivery mode.

An exactly-once node's aborted transactions stay in the log; a reader that
counted them would see sessions twice (docs/delivery.md).  Each reader is
opened here against a fake client that records how it was configured.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import benchmarks.measure
import framework.dead_letters
import framework.sessions
import router.readback
from framework.commands import deadletters
from framework.kernel.config import ConnectionConfig
from framework.sessions import COMMITTED, read_sessions
from router.readback import read_topics
from sessionizer.aggregation.spark_job import _kafka_options


class FakeConsumer:
    """A consumer of empty topics that remembers its configuration."""

    opened: list[dict[str, Any]] = []

    def __init__(self, *args: Any, **config: Any) -> None:
        FakeConsumer.opened.append(config)

    def assign(self, partitions: list[Any]) -> None:
        """Nothing to assign."""

    def end_offsets(self, partitions: list[Any], **_: Any) -> dict[Any, int]:
        return dict.fromkeys(partitions, 0)

    def partitions_for_topic(self, topic: str) -> set[int]:
        return {0}

    def seek(self, *args: Any) -> None:
        """Nothing to seek."""

    def seek_to_beginning(self, *args: Any) -> None:
        """Nothing to seek."""

    def position(self, partition: Any) -> int:
        return 0

    def close(self) -> None:
        """Nothing to close."""


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    FakeConsumer.opened = []
    monkeypatch.setattr(router.readback, "assigned_consumer", FakeConsumer)
    monkeypatch.setattr(framework.dead_letters, "assigned_consumer", FakeConsumer)
    monkeypatch.setattr(benchmarks.measure, "KafkaConsumer", FakeConsumer)
    yield FakeConsumer.opened


def test_the_readback_reads_committed_records_by_default(opened: list[dict[str, Any]]) -> None:
    assert read_topics("b:9092", ["t.sessions"]) == {"t.sessions": []}
    assert opened[-1]["isolation_level"] == "read_committed"


def test_sessions_are_read_committed_even_if_the_readback_default_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: dict[str, Any] = {}

    def fake_read_topics(bootstrap: str, topics: list[str], **kwargs: Any) -> dict[str, list[Any]]:
        asked.update(kwargs)
        return {topic: [] for topic in topics}

    monkeypatch.setattr(framework.sessions, "read_topics", fake_read_topics)
    assert read_sessions("b:9092", "t") == []
    assert asked["isolation_level"] == COMMITTED == "read_committed"


def test_the_sessions_command_and_the_demo_read_through_read_sessions() -> None:
    # Both import the one reader pinned above; a reader of their own would escape the pin.
    import framework.commands.sessions as command
    import framework.demo_story as demo

    assert vars(command)["read_sessions"] is read_sessions
    assert vars(demo)["read_sessions"] is read_sessions


def test_spark_reads_committed_records_whatever_the_properties_say() -> None:
    options = _kafka_options("b:9092", "t.sessions", {"isolation.level": "read_uncommitted"})
    assert options["kafka.isolation.level"] == "read_committed"
    assert options["subscribe"] == "t.sessions"


def test_dead_letter_readers_read_committed_records(opened: list[dict[str, Any]]) -> None:
    framework.dead_letters.TopicReader("b:9092", {})
    assert opened[-1]["isolation_level"] == "read_committed"
    connection = ConnectionConfig("z:2181", "b:9092", "t")
    assert deadletters._emitted_ids(connection) == set()  # replay's look at emitted ids
    assert opened[-1]["isolation_level"] == "read_committed"


def test_the_benchmarks_read_sessions_committed(opened: list[dict[str, Any]]) -> None:
    assert benchmarks.measure.end_offset("b:9092", "t.sessions") == 0
    assert opened[-1]["isolation_level"] == "read_committed"
    assert benchmarks.measure.read_json_topic("b:9092", "t.sessions") == []
    assert opened[-1]["isolation_level"] == "read_committed"
