"""The transactional producer and the committed-log reader over confluent-kafka (librdkafka)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextlib import suppress
from typing import Any, Final

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from framework.kafka.errors import ClientError, RecordTooLarge, SendFailed
from framework.kafka.producer import Headers
from framework.kafka.transactional import ProducerFenced, TransactionAborted, TransactionRetriable
from framework.kernel.kafka_settings import librdkafka_logger

__all__ = ["ConfluentCommittedLog", "ConfluentTransactional"]

_FENCED: Final = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)
_FULL_QUEUE_WAIT_S: Final = 0.05
_POLL_S: Final = 0.2


def _error(exc: KafkaException) -> Any:
    return exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None


def _mapped(exc: KafkaException, doing: str) -> ClientError:
    """librdkafka's transactional error as the layer's: fenced, abort needed, or retry."""
    error = _error(exc)
    text = f"{doing}: {exc}"
    if error is None:
        return TransactionAborted(text)
    if error.fatal() or error.code() in _FENCED:
        return ProducerFenced(text)
    if error.txn_requires_abort():
        return TransactionAborted(text)
    if error.retriable():
        return TransactionRetriable(text)
    return TransactionAborted(text)


class ConfluentTransactional:
    """A librdkafka producer with `transactional.id` set (idempotent, acks=all)."""

    def __init__(self, transactional_id: str, settings: Mapping[str, Any]) -> None:
        self.transactional_id = transactional_id
        self._open = False
        self._queue_wait_s = int(str(settings.get("delivery.timeout.ms", 30_000))) / 1000
        try:
            self._producer = Producer(
                {
                    **settings,
                    "transactional.id": transactional_id,
                    "delivery.report.only.error": True,
                    "logger": librdkafka_logger(),
                }
            )
        except KafkaException as exc:
            raise ClientError(str(exc)) from exc

    @property
    def in_transaction(self) -> bool:
        """True between `begin` and the end of `commit` or `abort`."""
        return self._open

    def init(self, timeout: float) -> None:
        """`init_transactions`: fences earlier producers of the id, aborts their transaction."""
        try:
            self._producer.init_transactions(timeout)
        except KafkaException as exc:
            raise _mapped(exc, f"{self.transactional_id}: init_transactions") from exc

    def begin(self) -> None:
        """`begin_transaction` (local)."""
        try:
            self._producer.begin_transaction()
        except KafkaException as exc:
            raise _mapped(exc, f"{self.transactional_id}: begin_transaction") from exc
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
        """Queue one record in the transaction; a full local queue is served until there is room."""
        kwargs: dict[str, Any] = {"timestamp": timestamp_ms or 0}
        if headers is not None:
            kwargs["headers"] = list(headers)
        if partition is not None:
            kwargs["partition"] = partition
        deadline = None
        while True:
            try:
                self._producer.produce(topic, value, key, **kwargs)
                return
            except BufferError:
                now = time.monotonic()
                deadline = deadline or now + self._queue_wait_s
                if now >= deadline:
                    raise SendFailed("the local queue stayed full") from None
                self._producer.poll(_FULL_QUEUE_WAIT_S)
            except KafkaException as exc:
                error = _error(exc)
                if error is not None and error.code() == KafkaError.MSG_SIZE_TOO_LARGE:
                    raise RecordTooLarge(str(exc)) from exc
                if error is not None and (error.fatal() or error.code() in _FENCED):
                    raise ProducerFenced(f"{self.transactional_id}: {exc}") from exc
                raise SendFailed(str(exc)) from exc

    def commit(self, timeout: float) -> None:
        """`commit_transaction` (it flushes first); a retriable failure may be called again."""
        try:
            self._producer.commit_transaction(timeout)
        except KafkaException as exc:
            raise _mapped(exc, f"{self.transactional_id}: commit_transaction") from exc
        self._open = False

    def abort(self, timeout: float) -> None:
        """`abort_transaction`: drops what is queued; nothing of it is ever committed."""
        try:
            self._producer.abort_transaction(timeout)
        except KafkaException as exc:
            raise _mapped(exc, f"{self.transactional_id}: abort_transaction") from exc
        self._open = False

    def close(self, timeout: float) -> None:
        """Abort an open transaction (best effort), then stop librdkafka's threads."""
        if self._open:
            # Else the next owner's init_transactions (or the broker's timeout) aborts it.
            with suppress(ClientError):
                self.abort(timeout)
        # A fenced (fatal) producer refuses even these; it is released all the same.
        with suppress(KafkaException):
            self._producer.purge()
        close = getattr(self._producer, "close", None)  # confluent-kafka >= 2.13
        if close is not None:
            with suppress(KafkaException):
                close()


class ConfluentCommittedLog:
    """A `read_committed` consumer of every partition, kept between reads: each `latest`
    reads on from where the previous one stopped, up to the high watermark as of the call."""

    def __init__(
        self, bootstrap: str, topic: str, *, client_id: str, properties: Mapping[str, str]
    ) -> None:
        self.topic = topic
        self._settings = {
            "bootstrap.servers": bootstrap,
            "client.id": f"{client_id}-state",
            "logger": librdkafka_logger(),
            "group.id": f"{client_id}-state-unused",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 10,
            **properties,
        }
        self._reader: Any = None
        self._ends: Any = None  # read_uncommitted: its watermarks are the high watermarks
        self._values: dict[bytes, bytes | None] = {}
        self._partitions: list[int] = []
        self._eof: dict[int, int] = {}
        """Where the reader last reached a partition's end (past its control records)."""

    def latest(self, key: bytes, timeout: float) -> bytes | None:
        """The newest committed value of `key` up to the topic's high watermark as of now."""
        deadline = time.monotonic() + timeout
        try:
            reader = self._reading(timeout)
            targets = self._targets(timeout)
            while True:
                left = [p for p, end in targets.items() if self._position(reader, p) < end]
                if not left:
                    return self._values.get(key)
                if time.monotonic() >= deadline:
                    raise ClientError(
                        f"{self.topic}: partitions {left} not read to their end in {timeout:g} s "
                        "(an open transaction holds them back, or Kafka is away)"
                    )
                self._apply(reader.poll(_POLL_S), targets)
        except KafkaException as exc:
            self.close()
            raise ClientError(f"{self.topic}: unreadable ({exc})") from exc

    def _reading(self, timeout: float) -> Any:
        if self._reader is None:
            reader = Consumer({**self._settings, "isolation.level": "read_committed"})
            metadata = reader.list_topics(self.topic, timeout=timeout)
            found = metadata.topics.get(self.topic)
            if found is None or found.error is not None or not found.partitions:
                reader.close()
                raise ClientError(f"topic {self.topic} does not exist (run `provision`)")
            self._partitions = sorted(found.partitions)
            reader.assign([TopicPartition(self.topic, p, 0) for p in self._partitions])
            self._reader = reader
            self._eof = {}
        return self._reader

    def _targets(self, timeout: float) -> dict[int, int]:
        if self._ends is None:
            self._ends = Consumer({**self._settings, "isolation.level": "read_uncommitted"})
        return {
            p: int(
                self._ends.get_watermark_offsets(
                    TopicPartition(self.topic, p), timeout=timeout, cached=False
                )[1]
            )
            for p in self._partitions
        }

    def _position(self, reader: Any, partition: int) -> int:
        (found,) = reader.position([TopicPartition(self.topic, partition)])
        return max(int(found.offset), self._eof.get(partition, -1))

    def _apply(self, message: Any, targets: dict[int, int]) -> None:
        if message is None:
            return
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                self._eof[message.partition()] = int(message.offset())
                return
            raise KafkaException(error)
        self._values[message.key()] = message.value()

    def close(self) -> None:
        """Close both consumers (a later `latest` opens them again and reads from the start)."""
        for consumer in (self._reader, self._ends):
            if consumer is not None:
                consumer.close()
        self._reader = self._ends = None
        self._values = {}
