"""The layer's producer over kafka-python (`KafkaProducer`), and its partitioner."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from kafka import KafkaAdminClient, KafkaProducer
from kafka.errors import KafkaError, MessageSizeTooLargeError, RecordListTooLargeError
from kafka.partitioner.default import DefaultPartitioner

from framework.kafka.errors import ClientError, FlushIncomplete, RecordTooLarge, SendFailed
from framework.kafka.producer import DeliveryFailure, Headers
from framework.kernel.kafka_settings import kafka_python_settings

__all__ = ["KafkaPythonProducer", "OnePartitionFirst", "producer_settings", "warm_metadata"]

_TOO_LARGE = (MessageSizeTooLargeError, RecordListTooLargeError)


def producer_settings(properties: Mapping[str, str]) -> dict[str, Any]:
    """`KafkaProducer` keyword arguments for client properties by their standard names."""
    return kafka_python_settings(properties, KafkaProducer.DEFAULT_CONFIG)


class KafkaPythonProducer:
    """`KafkaProducer`; failed deliveries come back on its I/O thread and wait for `flush`."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self._settings = dict(settings)
        self._lock = threading.Lock()
        self._failures: list[DeliveryFailure] = []
        try:
            self._producer = KafkaProducer(**settings)
        except KafkaError as exc:
            raise ClientError(str(exc), repr(exc)) from exc

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        *,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        token: object = None,
    ) -> None:
        """Queue one record (kafka-python batches it; the I/O thread sends)."""
        try:
            future = self._producer.send(
                topic,
                value=value,
                key=key,
                headers=headers,
                partition=partition,
                timestamp_ms=timestamp_ms,
            )
        except _TOO_LARGE as exc:
            raise RecordTooLarge(str(exc), repr(exc)) from exc
        except KafkaError as exc:  # no metadata or buffer space within max_block_ms
            raise SendFailed(str(exc), repr(exc)) from exc
        # Only an errback: success is settled by flush(), and a per-record success
        # callback would contend with the I/O thread for the GIL.
        future.add_errback(self._failed, topic, key, token)

    def flush(self, timeout: float | None) -> list[DeliveryFailure]:
        """Wait for every acknowledgement; return the failures since the last flush."""
        try:
            self._producer.flush(timeout=timeout)
        except KafkaError as exc:
            with self._lock:  # what failed is replayed with everything else unsettled
                self._failures = []
            raise FlushIncomplete(str(exc), repr(exc)) from exc
        # kafka-python runs a failed record's errbacks before it marks its batch done.
        with self._lock:
            failures, self._failures = self._failures, []
        return failures

    def close(self, timeout: float | None = None) -> None:
        """Close the producer (waits up to `timeout` for what is still queued)."""
        self._producer.close(timeout=timeout)

    def topic_names(self, timeout: float) -> list[str]:
        """Every topic, through an admin client on the producer's connection settings.

        kafka-python's producer cannot list topics; the admin client's own request
        timeout bounds the wait instead of `timeout`.
        """
        accepted = KafkaAdminClient.DEFAULT_CONFIG
        connection = {k: v for k, v in self._settings.items() if k in accepted}
        try:
            admin = KafkaAdminClient(**connection)
        except KafkaError as exc:
            raise ClientError(str(exc), repr(exc)) from exc
        try:
            return list(admin.list_topics())
        except KafkaError as exc:
            raise ClientError(str(exc), repr(exc)) from exc
        finally:
            admin.close()

    def warm_metadata(self, topics: Sequence[str]) -> None:
        """Learn every topic's partitions in one metadata request, not one blocking send each.

        kafka-python's first `send` to a topic adds it to the tracked topics and waits
        for a metadata round trip, one topic at a time. Adding them all first (through
        the I/O thread's thread-safe queue) makes the first wait fetch them together.
        """
        warm_metadata(self._producer, topics)

    def _failed(self, topic: str, key: bytes | None, token: object, exc: BaseException) -> None:
        failure = DeliveryFailure(
            topic, key, str(exc), repr(exc), isinstance(exc, _TOO_LARGE), token
        )
        with self._lock:
            self._failures.append(failure)


def warm_metadata(producer: KafkaProducer, topics: Sequence[str]) -> None:
    """`KafkaPythonProducer.warm_metadata` for a bare `KafkaProducer` (the benchmark's)."""
    sender = producer._sender  # kafka-python has no public bulk call
    for topic in topics:
        sender.add_topic(topic)
    for topic in topics:
        producer.partitions_for(topic)


class OnePartitionFirst(DefaultPartitioner):  # type: ignore[misc]  # kafka-python is untyped
    """kafka-python's default choice of partition, without hashing a key when there is one.

    The project's output topics have one partition: the pure-Python murmur2 of every
    session id picked partition 0 anyway, at a few percent of the node's loop.
    """

    def partition(
        self,
        topic: str,
        key: Any,
        serialized_key: bytes | None,
        value: Any,
        serialized_value: bytes | None,
        cluster: Any,
    ) -> int:
        """The partition of a record (`DefaultPartitioner`'s, by the key's murmur2 hash)."""
        partitions = cluster.partitions_for_topic(topic)
        if serialized_key is not None and partitions is not None and len(partitions) == 1:
            return int(next(iter(partitions)))
        return int(super().partition(topic, key, serialized_key, value, serialized_value, cluster))
