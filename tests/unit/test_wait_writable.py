"""`wait_writable`: a leader not yet holding a new partition is asked again, up to a deadline."""

from __future__ import annotations

from typing import Any

import pytest
from kafka import TopicPartition
from kafka.errors import (
    KafkaConnectionError,
    NotLeaderForPartitionError,
    UnknownTopicOrPartitionError,
)

from framework.kafka.admin import wait_writable
from framework.kafka.errors import ClientError, ClientTimeout, MappedClient


class _Leaders:
    """An admin client whose ListOffsets fails with `errors` in turn, then answers."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.asked: list[set[TopicPartition]] = []

    def list_partition_offsets(self, specs: dict[TopicPartition, Any], timeout_ms: int) -> dict:
        assert timeout_ms >= 1
        self.asked.append(set(specs))
        if self.errors:
            raise self.errors.pop(0)
        return dict.fromkeys(specs, 0)


def test_every_partition_of_every_topic_is_asked_until_all_answer() -> None:
    leaders = _Leaders(NotLeaderForPartitionError("no log yet"), UnknownTopicOrPartitionError())
    wait_writable(MappedClient(leaders), ["a", "b"], 30.0, partitions=2)
    expected = {TopicPartition(t, p) for t in ("a", "b") for p in (0, 1)}
    assert leaders.asked == [expected] * 3


def test_a_leader_that_never_takes_the_partition_is_a_timeout_naming_why() -> None:
    leaders = _Leaders(NotLeaderForPartitionError("no log yet"))
    with pytest.raises(ClientTimeout, match=r"1 new topics were not writable after 0 s") as caught:
        wait_writable(MappedClient(leaders), ["a"], 0.0)
    assert caught.value.client_class == "NotLeaderForPartitionError"


def test_other_errors_are_not_waited_out() -> None:
    leaders = _Leaders(KafkaConnectionError("down"), NotLeaderForPartitionError())
    with pytest.raises(ClientError) as caught:
        wait_writable(MappedClient(leaders), ["a"], 30.0)
    assert caught.value.client_class == "KafkaConnectionError"
    assert len(leaders.asked) == 1


def test_no_topics_asks_nothing() -> None:
    leaders = _Leaders(NotLeaderForPartitionError())
    wait_writable(MappedClient(leaders), [], 0.0)
    assert leaders.asked == []
