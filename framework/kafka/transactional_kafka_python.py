"""The transactional producer and the committed-log reader over kafka-python (>= 2.1)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextlib import suppress
from typing import Any, Final

from kafka import KafkaProducer, TopicPartition
from kafka.errors import (
    InvalidProducerEpochError,
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    ProducerFencedError,
    RecordListTooLargeError,
)

from framework.kafka.consumer import assigned_consumer
from framework.kafka.errors import ClientError, RecordTooLarge, SendFailed
from framework.kafka.producer import Headers
from framework.kafka.transactional import ProducerFenced, TransactionAborted, TransactionRetriable

__all__ = ["KafkaPythonCommittedLog", "KafkaPythonTransactional"]

_FENCED: Final = (ProducerFencedError, InvalidProducerEpochError)
_TOO_LARGE: Final = (MessageSizeTooLargeError, RecordListTooLargeError)
_POLL_MS: Final = 200


class KafkaPythonTransactional:
    """`KafkaProducer(transactional_id=...)`. Its `commit_transaction` and `abort_transaction`
    wait without a bound, so the transaction manager's result is awaited with one here."""

    def __init__(self, transactional_id: str, settings: Mapping[str, Any]) -> None:
        self.transactional_id = transactional_id
        self._open = False
        self._pending: Any = None  # the commit or abort result still awaited
        self._pending_commit = False  # which of the two it is
        try:
            self._producer = KafkaProducer(**settings, transactional_id=transactional_id)
        except KafkaError as exc:
            raise ClientError(str(exc), repr(exc)) from exc
        self._manager = self._producer._transaction_manager

    @property
    def in_transaction(self) -> bool:
        """True between `begin` and the end of `commit` or `abort`."""
        return self._open

    def init(self, timeout: float) -> None:
        """`init_transactions` (bounded by the producer's `max_block_ms`)."""
        try:
            self._producer.init_transactions()
        except KafkaError as exc:
            raise self._mapped(exc, "init_transactions") from exc

    def begin(self) -> None:
        """`begin_transaction` (local)."""
        try:
            self._producer.begin_transaction()
        except KafkaError as exc:
            raise self._mapped(exc, "begin_transaction") from exc
        self._open = True

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
        """Queue one record in the transaction (a failed delivery fails the commit)."""
        try:
            self._producer.send(
                topic,
                value=value,
                key=key,
                headers=headers,
                partition=partition,
                timestamp_ms=timestamp_ms,
            )
        except _TOO_LARGE as exc:
            raise RecordTooLarge(str(exc), repr(exc)) from exc
        except KafkaError as exc:
            if self._manager.has_fatal_error() or isinstance(exc, _FENCED):
                raise ProducerFenced(f"{self.transactional_id}: {exc!r}") from exc
            raise SendFailed(str(exc), repr(exc)) from exc

    def commit(self, timeout: float) -> None:
        """Flush, then end the transaction with a commit, waiting at most `timeout`."""
        self._end(True, timeout)

    def abort(self, timeout: float) -> None:
        """End the transaction with an abort, waiting at most `timeout`."""
        self._end(False, timeout)

    def _end(self, commit: bool, timeout: float) -> None:
        doing = "commit_transaction" if commit else "abort_transaction"
        deadline = time.monotonic() + timeout
        if self._pending is not None and self._pending_commit != commit:
            # Waiting on the other one would report its end as this one's: an abort that
            # found a commit in flight would "succeed" when the commit landed.
            other = "commit_transaction" if self._pending_commit else "abort_transaction"
            raise ClientError(f"{self.transactional_id}: {doing}: {other} still in flight")
        try:
            if self._pending is None:
                self._pending_commit = commit
                if commit:
                    self._producer.flush(timeout=timeout)
                start = self._manager.begin_commit if commit else self._manager.begin_abort
                self._pending = start()
                self._producer._sender.wakeup()
            left_ms = max(0.0, deadline - time.monotonic()) * 1000
            done = self._pending.wait(timeout_ms=left_ms)
        except KafkaTimeoutError as exc:
            raise TransactionRetriable(f"{self.transactional_id}: {doing}: {exc!r}") from exc
        except KafkaError as exc:
            self._pending = None
            raise self._mapped(exc, doing) from exc
        if not done:
            raise TransactionRetriable(
                f"{self.transactional_id}: {doing} not done in {timeout:g} s"
            )
        self._pending = None
        self._open = False

    def close(self, timeout: float) -> None:
        """Abort an open transaction (best effort), then close the producer."""
        if self._open:
            # Else the next owner's init_transactions (or the broker's timeout) aborts it.
            with suppress(ClientError):
                self.abort(timeout)
        with suppress(KafkaError):  # a fenced (fatal) producer is released all the same
            self._producer.close(timeout=0 if self._open else timeout)

    def _mapped(self, exc: KafkaError, doing: str) -> ClientError:
        text = f"{self.transactional_id}: {doing}: {exc!r}"
        if isinstance(exc, _FENCED) or self._manager.has_fatal_error():
            return ProducerFenced(text)
        if self._manager.has_abortable_error():
            return TransactionAborted(text)
        if getattr(exc, "retriable", False):
            return TransactionRetriable(text)
        return TransactionAborted(text)


class KafkaPythonCommittedLog:
    """A `read_committed` `KafkaConsumer` of every partition, kept between reads."""

    def __init__(
        self, bootstrap: str, topic: str, *, client_id: str, properties: Mapping[str, str]
    ) -> None:
        self.topic = topic
        self._bootstrap = bootstrap
        self._client_id = f"{client_id}-state"
        self._properties = dict(properties)
        self._reader: Any = None
        self._ends: Any = None  # read_uncommitted: its end offsets are the high watermarks
        self._values: dict[bytes, bytes | None] = {}
        self._partitions: list[TopicPartition] = []

    def latest(self, key: bytes, timeout: float) -> bytes | None:
        """The newest committed value of `key` up to the topic's high watermark as of now."""
        deadline = time.monotonic() + timeout
        try:
            reader = self._reading()
            targets = self._ends.end_offsets(self._partitions)
            while True:
                left = [
                    tp.partition for tp in self._partitions if reader.position(tp) < targets[tp]
                ]
                if not left:
                    return self._values.get(key)
                if time.monotonic() >= deadline:
                    raise ClientError(
                        f"{self.topic}: partitions {left} not read to their end in {timeout:g} s "
                        "(an open transaction holds them back, or Kafka is away)"
                    )
                for records in reader.poll(timeout_ms=_POLL_MS).values():
                    for record in records:
                        self._values[record.key] = record.value
        except ClientError:  # `assigned_consumer`'s calls are mapped already
            self.close()
            raise
        except KafkaError as exc:
            self.close()
            raise ClientError(f"{self.topic}: unreadable ({exc!r})", repr(exc)) from exc

    def _reading(self) -> Any:
        if self._reader is None:
            self._ends = self._consumer("read_uncommitted")
            found = self._ends.partitions_for_topic(self.topic)
            if not found:
                self.close()
                raise ClientError(f"topic {self.topic} does not exist (run `provision`)")
            self._partitions = [TopicPartition(self.topic, p) for p in sorted(found)]
            reader = self._consumer("read_committed")
            reader.assign(self._partitions)
            reader.seek_to_beginning(*self._partitions)
            self._reader = reader
        return self._reader

    def _consumer(self, isolation: str) -> Any:
        return assigned_consumer(
            self._bootstrap, self._client_id, self._properties, isolation_level=isolation
        )

    def close(self) -> None:
        """Close both consumers (a later `latest` opens them again and reads from the start)."""
        for consumer in (self._reader, self._ends):
            if consumer is not None:
                consumer.close()
        self._reader = self._ends = None
        self._values = {}
