"""`HandoverLog`s over Kafka: the `<app>.handover` topic, with kafka-python or confluent-kafka.

The topic is compacted and keyed by stream, so it keeps each stream's latest
record.  `write_many` sends all of a release's records to partition 0, then
waits once (at most its timeout) for the acknowledgement of all in-sync
replicas, returning each record's offset or why it has none; `read` reads one
offset with a reader kept for all reads (a seek each: one consumer start-up per
node, not one per stream) and gives up at its deadline.  Both clients
take the node's client properties (security settings).  `open`, called when a
node with handovers on starts, creates the producer and the reader (kafka-python:
in the background, learning the topic's partitions too), so a move pays no
client start-up; otherwise the first write or read creates them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from typing import Any, Final

from state.errors import StateError
from state.handover import Written

__all__ = ["MAX_HANDOVER_BYTES", "ConfluentHandoverLog", "KafkaPythonHandoverLog"]

MAX_HANDOVER_BYTES: Final = 16 * 1024 * 1024
"""The largest handover record sent (the topic's `max.message.bytes`); larger: replay."""
_REQUEST_BYTES: Final = MAX_HANDOVER_BYTES + 64 * 1024
_READER_WAIT_MS: Final = 10
"""Longest the broker holds the kept reader's fetch at the end of the topic."""
_METADATA_WAIT_S: Final = 1.0
"""Longest a starting node waits for the handover topic's metadata (then the first read asks)."""


class _HandoverLog:
    """What both clients' handover logs share: where they write, and their background start."""

    def __init__(
        self, bootstrap: str, topic: str, *, client_id: str, properties: Mapping[str, str]
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.client_id = client_id
        self.properties = dict(properties)
        self._producer: Any = None
        self._lock = threading.Lock()  # the warm-up thread and the loop may both open clients
        self._closed = False

    def open(self, timeout: float) -> None:
        """Start the producer and the reader, and learn the topic's metadata, in the background.

        Called when the node starts (without delaying it), so a planned move pays neither
        the clients' start-up nor the first metadata round trip.  A failure here is not
        final: the first write or read opens its client again if need be, and reports
        what fails.
        """
        thread = threading.Thread(
            target=self._warm, args=(timeout,), name=f"{self.client_id}-handover-open", daemon=True
        )
        thread.start()

    def _warm(self, timeout: float) -> None:
        raise NotImplementedError


class KafkaPythonHandoverLog(_HandoverLog):
    """The handover topic through kafka-python."""

    def __init__(
        self, bootstrap: str, topic: str, *, client_id: str, properties: Mapping[str, str]
    ) -> None:
        super().__init__(bootstrap, topic, client_id=client_id, properties=properties)
        self._reader: tuple[Any, Any] | None = None  # (consumer, partition), the loop's only

    def _warm(self, timeout: float) -> None:
        from kafka.errors import KafkaError

        # Why this may fail is reported by the write or read that needs it (it retries).
        with suppress(KafkaError, StateError):
            self._opened(timeout).partitions_for(self.topic)
        with suppress(KafkaError, StateError):
            self._reading()

    def _opened(self, timeout: float) -> Any:
        """The producer, created at the first call (the warm-up thread or a write)."""
        from kafka import KafkaProducer

        from framework.kernel.kafka_settings import kafka_python_config

        with self._lock:
            if self._closed:
                raise StateError(f"handover topic {self.topic}: its producer is closed")
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
            return self._producer

    def write_many(self, records: Sequence[tuple[str, bytes]], timeout: float) -> list[Written]:
        """Send every record, flush once, then collect each one's offset (or why not)."""
        from kafka.errors import KafkaError, KafkaTimeoutError

        deadline = time.monotonic() + timeout
        try:
            producer = self._opened(timeout)
        except (KafkaError, StateError) as exc:
            return [self._failed(stream, exc) for stream, _ in records]
        pending: list[Any] = []
        for stream, data in records:
            if time.monotonic() >= deadline:  # a send blocked on metadata took the time
                pending.append(_late(stream, timeout))
                continue
            try:
                key = stream.encode("utf-8")
                pending.append(producer.send(self.topic, key=key, value=data, partition=0))
            except KafkaError as exc:
                pending.append(self._failed(stream, exc))
        with suppress(KafkaTimeoutError):  # the records not done by then fail below
            producer.flush(timeout=max(0.0, deadline - time.monotonic()))
        return [
            self._offset(stream, sent, timeout)
            for (stream, _), sent in zip(records, pending, strict=True)
        ]

    def _offset(self, stream: str, sent: Any, timeout: float) -> Written:
        """The acknowledged offset of a sent record (its future), or why there is none."""
        if isinstance(sent, StateError):
            return sent
        if not sent.is_done:
            return _late(stream, timeout)
        if sent.failed():
            return self._failed(stream, sent.exception)
        return int(sent.value.offset)

    def _failed(self, stream: str, exc: BaseException) -> StateError:
        return StateError(f"stream {stream}: handover record not written to {self.topic} ({exc!r})")

    def read(self, stream: str, offset: int, timeout: float) -> bytes | None:
        """The record at `offset` if it is the stream's; `StateError` if not read in time."""
        from kafka.errors import KafkaError

        deadline = time.monotonic() + timeout
        try:
            consumer, partition = self._reading()
            consumer.seek(partition, offset)  # fetched records of an earlier seek are dropped
            while time.monotonic() < deadline:
                left_ms = max(1, int((deadline - time.monotonic()) * 1000))
                for records in consumer.poll(timeout_ms=min(left_ms, 500)).values():
                    for record in records:
                        if record.offset >= offset:
                            return _mine(record.offset, offset, record.key, record.value, stream)
        except KafkaError as exc:
            self._close_reader()  # not reused: the next read starts a fresh one
            raise StateError(f"stream {stream}: handover record unreadable ({exc!r})") from exc
        raise StateError(f"stream {stream}: handover record not read within {timeout:g} s")

    def _reading(self) -> tuple[Any, Any]:
        """The reader and its partition: one consumer kept for every read (a seek each), so an
        assignment of many streams pays for one consumer's start-up, not one each."""
        from kafka import TopicPartition

        from framework.kernel.kafka_settings import assigned_consumer

        with self._lock:  # created by the warm-up thread or the loop, then used by the loop only
            if self._closed:
                raise StateError(f"handover topic {self.topic}: its reader is closed")
            if self._reader is None:
                partition = TopicPartition(self.topic, 0)
                reader = assigned_consumer(
                    self.bootstrap,
                    f"{self.client_id}-handover-reader",
                    self.properties,
                    fetch_max_wait_ms=_READER_WAIT_MS,  # see `ConfluentHandoverLog._reading`
                )
                reader.assign([partition])
                self._reader = (reader, partition)
            return self._reader

    def _close_reader(self) -> None:
        with self._lock:
            reader, self._reader = self._reader, None
        if reader is not None:
            reader[0].close()

    def close(self) -> None:
        """Close the reader and the producer, if they were opened."""
        self._close_reader()
        with self._lock:
            producer, self._producer, self._closed = self._producer, None, True
        if producer is not None:
            producer.close(timeout=5)


class ConfluentHandoverLog(_HandoverLog):
    """The handover topic through confluent-kafka (librdkafka)."""

    def __init__(
        self, bootstrap: str, topic: str, *, client_id: str, properties: Mapping[str, str]
    ) -> None:
        super().__init__(bootstrap, topic, client_id=client_id, properties=properties)
        self._reader: Any = None  # the handover reader, kept between reads

    def _warm(self, timeout: float) -> None:
        from confluent_kafka import KafkaException

        # Why this may fail is reported by the write or read that needs it (it retries).
        with suppress(KafkaException, StateError):
            self._opened()
            # Asked for the topic's metadata now, a reader idle since its start does not wait
            # ~0.5-0.8 s for it at its first read (measured).  No assignment: it would fetch.
            self._reading().list_topics(self.topic, timeout=min(timeout, _METADATA_WAIT_S))

    def _opened(self) -> Any:
        """The producer, created at the first call (the warm-up thread or a write)."""
        from confluent_kafka import Producer

        from framework.kernel.kafka_settings import librdkafka_logger

        with self._lock:
            if self._closed:
                raise StateError(f"handover topic {self.topic}: its producer is closed")
            if self._producer is None:
                self._producer = Producer(
                    {
                        "bootstrap.servers": self.bootstrap,
                        "client.id": f"{self.client_id}-handover",
                        "logger": librdkafka_logger(),  # its lines as log records
                        "acks": "all",
                        "message.max.bytes": _REQUEST_BYTES,
                        # The user's properties last: theirs win (the reserved ones cannot be set).
                        **self.properties,
                    }
                )
            return self._producer

    def write_many(self, records: Sequence[tuple[str, bytes]], timeout: float) -> list[Written]:
        """Produce every record, flush once, then collect each one's offset (or why not)."""
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + timeout
        outcomes: dict[int, Written] = {}

        def delivered(index: int, stream: str) -> Callable[[Any, Any], None]:
            def report(error: Any, message: Any) -> None:
                outcomes[index] = (
                    int(message.offset())
                    if error is None
                    else StateError(
                        f"stream {stream}: handover record refused by {self.topic} ({error})"
                    )
                )

            return report

        try:
            producer = self._opened()
            for index, (stream, data) in enumerate(records):
                try:
                    producer.produce(
                        self.topic,
                        key=stream.encode("utf-8"),
                        value=data,
                        partition=0,
                        on_delivery=delivered(index, stream),
                    )
                except (KafkaException, BufferError) as exc:
                    outcomes[index] = StateError(
                        f"stream {stream}: handover record not written to {self.topic} ({exc})"
                    )
            producer.flush(max(0.0, deadline - time.monotonic()))
        except (KafkaException, StateError) as exc:
            for index, (stream, _) in enumerate(records):
                outcomes.setdefault(
                    index,
                    StateError(
                        f"stream {stream}: handover record not written to {self.topic} ({exc})"
                    ),
                )
        return [
            outcomes[index] if index in outcomes else _late(stream, timeout)
            for index, (stream, _) in enumerate(records)
        ]

    def read(self, stream: str, offset: int, timeout: float) -> bytes | None:
        """The record at `offset` if it is the stream's; `StateError` if not read in time."""
        from confluent_kafka import KafkaException, TopicPartition

        deadline = time.monotonic() + timeout
        try:
            consumer = self._reading()
            # A new assignment: librdkafka drops what it fetched for the previous one.
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
            self._close_reader()  # not reused: the next read starts a fresh one
            raise StateError(f"stream {stream}: handover record unreadable ({exc})") from exc
        finally:
            self._unassign()
        raise StateError(f"stream {stream}: handover record not read within {timeout:g} s")

    def _reading(self) -> Any:
        """One consumer kept for every read (assigned at each record's offset), so an
        assignment of many streams pays for one consumer's start-up, not one each."""
        from confluent_kafka import Consumer

        from framework.kernel.kafka_settings import librdkafka_logger

        with self._lock:
            if self._closed:
                raise StateError(f"handover topic {self.topic}: its reader is closed")
            if self._reader is None:
                self._reader = Consumer(
                    {
                        "bootstrap.servers": self.bootstrap,
                        "client.id": f"{self.client_id}-handover-reader",
                        "logger": librdkafka_logger(),  # its lines as log records
                        "group.id": f"{self.client_id}-handover-unused",
                        "enable.auto.commit": False,
                        "enable.partition.eof": False,
                        # A fetch the broker holds at the end of the topic would delay the
                        # next read's fetch by up to this (librdkafka's default: 500 ms).
                        "fetch.wait.max.ms": _READER_WAIT_MS,
                        # The user's properties last: theirs win (the reserved ones cannot be set).
                        **self.properties,
                    }
                )
            return self._reader

    def _unassign(self) -> None:
        """Stop the reader fetching in the background until the next read (a broken one goes)."""
        from confluent_kafka import KafkaException

        if self._reader is None:
            return
        try:
            self._reader.unassign()
        except KafkaException:
            self._close_reader()

    def _close_reader(self) -> None:
        with self._lock:
            reader, self._reader = self._reader, None
        if reader is not None:
            reader.close()

    def close(self) -> None:
        """Close the reader; wait briefly for anything still queued, then let the producer go."""
        self._close_reader()
        with self._lock:
            producer, self._producer, self._closed = self._producer, None, True
        if producer is not None:
            producer.flush(5)


def _late(stream: str, timeout: float) -> StateError:
    return StateError(f"stream {stream}: handover record not acknowledged in {timeout:g} s")


def _mine(
    found: int, wanted: int, key: bytes | None, value: bytes | None, stream: str
) -> bytes | None:
    """The value if the record at `wanted` is there and is the stream's (compaction may drop it)."""
    if found != wanted or key != stream.encode("utf-8") or value is None:
        return None
    return value
