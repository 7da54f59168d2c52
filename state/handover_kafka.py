"""`HandoverLog`s over Kafka: the `<app>.handover` topic, with kafka-python or confluent-kafka.

The topic is compacted and keyed by stream, so it keeps each stream's latest
record.  `write` sends one record to partition 0 and waits (at most its
timeout) for the acknowledgement of all in-sync replicas, returning its offset;
`read` opens a short-lived reader at one offset and gives up at its deadline.
Both clients take the node's client properties (security settings), and the
producer is created at the first write, so a node that never moves a stream
never opens it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Final

from state.errors import StateError

__all__ = ["MAX_HANDOVER_BYTES", "ConfluentHandoverLog", "KafkaPythonHandoverLog"]

MAX_HANDOVER_BYTES: Final = 16 * 1024 * 1024
"""The largest handover record sent (the topic's `max.message.bytes`); larger: replay."""
_REQUEST_BYTES: Final = MAX_HANDOVER_BYTES + 64 * 1024


class KafkaPythonHandoverLog:
    """The handover topic through kafka-python."""

    def __init__(
        self, bootstrap: str, topic: str, *, client_id: str, properties: Mapping[str, str]
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.client_id = client_id
        self.properties = dict(properties)
        self._producer: Any = None

    def write(self, stream: str, data: bytes, timeout: float) -> int:
        """Send the record; its offset once acknowledged (`StateError` if not in `timeout`)."""
        from kafka import KafkaProducer
        from kafka.errors import KafkaError

        from framework.kafka_settings import kafka_python_config

        try:
            if self._producer is None:
                self._producer = KafkaProducer(
                    **kafka_python_config(
                        self.properties,
                        KafkaProducer.DEFAULT_CONFIG,
                        bootstrap_servers=self.bootstrap,
                        client_id=f"{self.client_id}-handover",
                        acks="all",
                        max_request_size=_REQUEST_BYTES,
                        max_block_ms=int(timeout * 1000),
                    )
                )
            future = self._producer.send(
                self.topic, key=stream.encode("utf-8"), value=data, partition=0
            )
            return int(future.get(timeout=timeout).offset)
        except KafkaError as exc:
            raise StateError(
                f"stream {stream}: handover record not written to {self.topic} ({exc!r})"
            ) from exc

    def read(self, stream: str, offset: int, timeout: float) -> bytes | None:
        """The record at `offset` if it is the stream's; `StateError` if not read in time."""
        from kafka import TopicPartition
        from kafka.errors import KafkaError

        from framework.kafka_settings import assigned_consumer

        deadline = time.monotonic() + timeout
        consumer = None
        try:
            consumer = assigned_consumer(
                self.bootstrap, f"{self.client_id}-handover-reader", self.properties
            )
            partition = TopicPartition(self.topic, 0)
            consumer.assign([partition])
            consumer.seek(partition, offset)
            while time.monotonic() < deadline:
                left_ms = max(1, int((deadline - time.monotonic()) * 1000))
                for records in consumer.poll(timeout_ms=min(left_ms, 500)).values():
                    for record in records:
                        if record.offset >= offset:
                            return _mine(record.offset, offset, record.key, record.value, stream)
        except KafkaError as exc:
            raise StateError(f"stream {stream}: handover record unreadable ({exc!r})") from exc
        finally:
            if consumer is not None:
                consumer.close()
        raise StateError(f"stream {stream}: handover record not read within {timeout:g} s")

    def close(self) -> None:
        """Close the producer, if one was opened."""
        if self._producer is not None:
            self._producer.close(timeout=5)


class ConfluentHandoverLog:
    """The handover topic through confluent-kafka (librdkafka)."""

    def __init__(
        self, bootstrap: str, topic: str, *, client_id: str, properties: Mapping[str, str]
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.client_id = client_id
        self.properties = dict(properties)
        self._producer: Any = None

    def write(self, stream: str, data: bytes, timeout: float) -> int:
        """Send the record; its offset once acknowledged (`StateError` if not in `timeout`)."""
        from confluent_kafka import KafkaException, Producer

        if self._producer is None:
            self._producer = Producer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "client.id": f"{self.client_id}-handover",
                    "acks": "all",
                    "message.max.bytes": _REQUEST_BYTES,
                    # The user's properties last: theirs win (the reserved ones cannot be set).
                    **self.properties,
                }
            )
        outcome: list[Any] = []
        try:
            self._producer.produce(
                self.topic,
                key=stream.encode("utf-8"),
                value=data,
                partition=0,
                on_delivery=lambda error, message: outcome.append((error, message)),
            )
            self._producer.flush(timeout)
        except (KafkaException, BufferError) as exc:
            raise StateError(
                f"stream {stream}: handover record not written to {self.topic} ({exc})"
            ) from exc
        if not outcome:
            raise StateError(f"stream {stream}: handover record not acknowledged in {timeout:g} s")
        error, message = outcome[0]
        if error is not None:
            raise StateError(f"stream {stream}: handover record refused by {self.topic} ({error})")
        return int(message.offset())

    def read(self, stream: str, offset: int, timeout: float) -> bytes | None:
        """The record at `offset` if it is the stream's; `StateError` if not read in time."""
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        deadline = time.monotonic() + timeout
        consumer = None
        try:
            consumer = Consumer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "client.id": f"{self.client_id}-handover-reader",
                    "group.id": f"{self.client_id}-handover-unused",
                    "enable.auto.commit": False,
                    "enable.partition.eof": False,
                    # The user's properties last: theirs win (the reserved ones cannot be set).
                    **self.properties,
                }
            )
            consumer.assign([TopicPartition(self.topic, 0, offset)])
            while time.monotonic() < deadline:
                message = consumer.poll(min(0.5, max(0.01, deadline - time.monotonic())))
                if message is None:
                    continue
                if message.error() is not None:
                    raise StateError(f"stream {stream}: handover read failed ({message.error()})")
                found = message.offset() or 0
                if found >= offset:
                    return _mine(found, offset, message.key(), message.value(), stream)
        except KafkaException as exc:
            raise StateError(f"stream {stream}: handover record unreadable ({exc})") from exc
        finally:
            if consumer is not None:
                consumer.close()
        raise StateError(f"stream {stream}: handover record not read within {timeout:g} s")

    def close(self) -> None:
        """Wait briefly for anything still queued, then let the producer go."""
        if self._producer is not None:
            self._producer.flush(5)


def _mine(
    found: int, wanted: int, key: bytes | None, value: bytes | None, stream: str
) -> bytes | None:
    """The value if the record at `wanted` is there and is the stream's (compaction may drop it)."""
    if found != wanted or key != stream.encode("utf-8") or value is None:
        return None
    return value
