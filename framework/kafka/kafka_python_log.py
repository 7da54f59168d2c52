"""The keyed log (`framework.kafka.keyed_log`) through kafka-python."""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import suppress
from typing import Any, Final

from kafka import KafkaProducer, TopicPartition

from framework.kafka import consumer
from framework.kafka.errors import CLIENT, FLUSHING, ClientError, FlushIncomplete
from framework.kafka.kafka_python_keywords import client_keywords
from framework.kafka.keyed_log import ForwardRead, Found, KeyedLogBase, Unwritten, late

__all__ = ["KafkaPythonKeyedLog"]

_READER_WAIT_MS: Final = 10
"""Longest the broker holds the kept reader's fetch at the end of the topic."""


class KafkaPythonKeyedLog(KeyedLogBase):
    """The keyed log through kafka-python."""

    # (consumer, partition), the loop's only; set on the instance when first opened.
    _reader: tuple[Any, Any] | None = None

    def _warm(self, timeout: float) -> None:
        # Why this may fail is reported by the write or read that needs it (it retries).
        with suppress(ClientError), CLIENT:
            self._opened(timeout).partitions_for(self.topic)
        with suppress(ClientError), CLIENT:
            self._reading()

    def _opened(self, timeout: float) -> Any:
        """The producer, created at the first call (the warm-up thread or a write)."""

        def make() -> Any:
            with CLIENT:
                return KafkaProducer(
                    **client_keywords(
                        KafkaProducer,
                        self.properties,
                        bootstrap_servers=self.bootstrap,
                        client_id=f"{self.client_id}-handover",
                        acks="all",
                        max_request_size=self.max_request_bytes,
                        max_block_ms=int(timeout * 1000),
                    )
                )

        return self._kept_producer(make)

    def write_many(
        self, records: Sequence[tuple[bytes, bytes]], timeout: float
    ) -> list[int | Unwritten]:
        """Send every record, flush once, then collect each one's offset (or why not)."""
        deadline = time.monotonic() + timeout
        try:
            with CLIENT:
                producer = self._opened(timeout)
        except ClientError as exc:
            return [self._failed(exc.__cause__ or exc) for _ in records]
        pending: list[Any] = []
        for key, data in records:
            if time.monotonic() >= deadline:  # a send blocked on metadata took the time
                pending.append(late(timeout))
                continue
            try:
                with CLIENT:
                    pending.append(producer.send(self.topic, key=key, value=data, partition=0))
            except ClientError as exc:
                pending.append(self._failed(exc.__cause__ or exc))
        with suppress(FlushIncomplete), FLUSHING:  # the records not done by then fail below
            producer.flush(timeout=max(0.0, deadline - time.monotonic()))
        return [self._offset(sent, timeout) for sent in pending]

    def _offset(self, sent: Any, timeout: float) -> int | Unwritten:
        """The acknowledged offset of a sent record (its future), or why there is none."""
        if isinstance(sent, Unwritten):
            return sent
        if not sent.is_done:
            return late(timeout)
        if sent.failed():
            return self._failed(sent.exception)
        return int(sent.value.offset)

    def _failed(self, exc: BaseException) -> Unwritten:
        return Unwritten(f"not written to {self.topic} ({exc!r})")

    def read_many(self, offsets: Sequence[int], timeout: float) -> dict[int, Found]:
        """For each offset, the first record at or after it, read forward in one pass; those
        not found within `timeout` are left out."""
        deadline = time.monotonic() + timeout
        wanted = ForwardRead(offsets)
        if wanted.done:
            return {}
        try:
            with CLIENT:
                reader, partition = self._reading()
                reader.seek(partition, wanted.position)  # records of an earlier seek are dropped
                while not wanted.done and time.monotonic() < deadline:
                    left_ms = max(1, int((deadline - time.monotonic()) * 1000))
                    read = None
                    for records in reader.poll(timeout_ms=min(left_ms, 500)).values():
                        for record in records:
                            read = int(record.offset)
                            wanted.see(read, record.key, record.value)
                    seek = None if read is None else wanted.seek_from(read)
                    if seek is not None:
                        reader.seek(partition, seek)
        except ClientError as exc:
            if not exc.client_class:
                raise  # the reader is closed: as it came
            self._close_reader()  # not reused: the next read starts a fresh one
            raise ClientError(f"record unreadable ({exc.detail})") from exc
        return wanted.found

    def _reading(self) -> tuple[Any, Any]:
        """The reader and its partition: one consumer kept for every read (a seek each), so an
        assignment of many streams pays for one consumer's start-up, not one each."""

        def make() -> tuple[Any, Any]:
            partition = TopicPartition(self.topic, 0)
            reader = consumer.assigned_consumer(
                self.bootstrap,
                f"{self.client_id}-handover-reader",
                self.properties,
                fetch_max_wait_ms=_READER_WAIT_MS,  # see `ConfluentKeyedLog._reading`
            )
            reader.assign([partition])
            return reader, partition

        kept: tuple[Any, Any] = self._kept_reader(make)
        return kept

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
