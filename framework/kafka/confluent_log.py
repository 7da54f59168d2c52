"""The keyed log (`framework.kafka.keyed_log`) through confluent-kafka (librdkafka)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import Any, Final

from confluent_kafka import Consumer, Producer, TopicPartition

from framework.kafka.errors import CONFLUENT, ClientError
from framework.kafka.keyed_log import ForwardRead, Found, KeyedLogBase, Unwritten, late
from framework.kernel.kafka_settings import librdkafka_logger

__all__ = ["ConfluentKeyedLog"]

_READER_WAIT_MS: Final = 10
"""Longest the broker holds the kept reader's fetch at the end of the topic."""
_METADATA_WAIT_S: Final = 1.0
"""Longest a starting node waits for the topic's metadata (then the first read asks)."""


class ConfluentKeyedLog(KeyedLogBase):
    """The keyed log through confluent-kafka (librdkafka)."""

    def _warm(self, timeout: float) -> None:
        # Why this may fail is reported by the write or read that needs it (it retries).
        with suppress(ClientError), CONFLUENT:
            self._opened()
            # Asked for the topic's metadata now, a reader idle since its start does not wait
            # ~0.5-0.8 s for it at its first read (measured).  No assignment: it would fetch.
            self._reading().list_topics(self.topic, timeout=min(timeout, _METADATA_WAIT_S))

    def _opened(self) -> Any:
        """The producer, created at the first call (the warm-up thread or a write)."""
        return self._kept_producer(
            lambda: Producer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "client.id": f"{self.client_id}-handover",
                    "logger": librdkafka_logger(),  # its lines as log records
                    "acks": "all",
                    "message.max.bytes": self.max_request_bytes,
                    # The user's properties last: theirs win (the reserved ones cannot be set).
                    **self.properties,
                }
            )
        )

    def write_many(
        self, records: Sequence[tuple[bytes, bytes]], timeout: float
    ) -> list[int | Unwritten]:
        """Produce every record, flush once, then collect each one's offset (or why not)."""
        deadline = time.monotonic() + timeout
        outcomes: dict[int, int | Unwritten] = {}

        def delivered(index: int) -> Callable[[Any, Any], None]:
            def report(error: Any, message: Any) -> None:
                outcomes[index] = (
                    int(message.offset())
                    if error is None
                    else Unwritten(f"refused by {self.topic} ({error})")
                )

            return report

        try:
            with CONFLUENT:
                producer = self._opened()
            for index, (key, data) in enumerate(records):
                try:
                    with CONFLUENT:
                        producer.produce(
                            self.topic,
                            key=key,
                            value=data,
                            partition=0,
                            on_delivery=delivered(index),
                        )
                except ClientError as exc:
                    cause = exc.__cause__ or exc
                    outcomes[index] = Unwritten(f"not written to {self.topic} ({cause})")
            with CONFLUENT:
                producer.flush(max(0.0, deadline - time.monotonic()))
        except ClientError as exc:
            cause = exc.__cause__ or exc
            for index in range(len(records)):
                outcomes.setdefault(index, Unwritten(f"not written to {self.topic} ({cause})"))
        return [
            outcomes[index] if index in outcomes else late(timeout) for index in range(len(records))
        ]

    def read_many(self, offsets: Sequence[int], timeout: float) -> dict[int, Found]:
        """For each offset, the first record at or after it, read forward in one pass; those
        not found within `timeout` are left out."""
        deadline = time.monotonic() + timeout
        wanted = ForwardRead(offsets)
        if wanted.done:
            return {}
        try:
            with CONFLUENT:
                reader = self._reading()
                # A new assignment: librdkafka drops what it fetched for the previous one.
                reader.assign([TopicPartition(self.topic, 0, wanted.position)])
                while not wanted.done and time.monotonic() < deadline:
                    message = reader.poll(min(0.5, max(0.01, deadline - time.monotonic())))
                    if message is None:
                        continue
                    if message.error() is not None:
                        raise ClientError(f"read failed ({message.error()})")
                    read = message.offset() or 0
                    wanted.see(read, message.key(), message.value())
                    seek = wanted.seek_from(read)
                    if seek is not None:
                        reader.assign([TopicPartition(self.topic, 0, seek)])
        except ClientError as exc:
            if not exc.client_class:
                raise  # the record's own error, as it came
            self._close_reader()  # not reused: the next read starts a fresh one
            raise ClientError(f"record unreadable ({exc.__cause__ or exc})") from exc
        finally:
            self._unassign()
        return wanted.found

    def _reading(self) -> Any:
        """One consumer kept for every read (assigned at each record's offset), so an
        assignment of many streams pays for one consumer's start-up, not one each."""
        return self._kept_reader(
            lambda: Consumer(
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
        )

    def _unassign(self) -> None:
        """Stop the reader fetching in the background until the next read (a broken one goes)."""
        if self._reader is None:
            return
        try:
            with CONFLUENT:
                self._reader.unassign()
        except ClientError:
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
