"""The kafka-python sink's partitioner picks exactly the partitions kafka-python's default does."""

from __future__ import annotations

from kafka.partitioner.default import DefaultPartitioner

from framework.kafka.kafka_python import OnePartitionFirst as _OnePartitionFirst


class _Cluster:
    """The two questions a partitioner asks of kafka-python's cluster metadata."""

    def __init__(self, partitions: dict[str, set[int]]) -> None:
        self._partitions = partitions

    def topics(self) -> set[str]:
        return set(self._partitions)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return self._partitions.get(topic)

    def available_partitions_for_topic(self, topic: str) -> set[int]:
        return self._partitions.get(topic, set())


def test_same_partition_as_the_default_for_one_and_several_partitions() -> None:
    cluster = _Cluster({"one": {0}, "three": {0, 1, 2}, "moved": {4}})
    ours, default = _OnePartitionFirst(), DefaultPartitioner()
    keys = [f"sessionizer.stream.{n:04d}:{n * 7919}:ip|agent ü".encode() for n in range(500)]
    for topic in ("one", "three", "moved"):
        chosen = [ours.partition(topic, None, key, None, b"v", cluster) for key in keys]
        assert chosen == [default.partition(topic, None, key, None, b"v", cluster) for key in keys]
    assert {ours.partition("three", None, key, None, b"v", cluster) for key in keys} == {0, 1, 2}
    assert ours.partition("moved", None, keys[0], None, b"v", cluster) == 4


def test_a_record_without_key_still_goes_to_an_available_partition() -> None:
    cluster = _Cluster({"one": {0}, "three": {0, 1, 2}})
    assert _OnePartitionFirst().partition("one", None, None, None, b"v", cluster) == 0
    assert _OnePartitionFirst().partition("three", None, None, None, b"v", cluster) in {0, 1, 2}
