"""The transactional producer and the committed-log reader over confluent-kafka (librdkafka).

`ConfluentTransactional` is the layer's `ConfluentProducer` (its `send`, its
full-queue handling) with `transactional.id` set and the transaction calls
beside; every call into the client runs inside `framework.kafka.errors`'
`CONFLUENT`, and `_transactional` sorts what came out by librdkafka's flags.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any, Final

from confluent_kafka import Consumer, KafkaError, TopicPartition

from framework.kafka.closing import close_aside
from framework.kafka.confluent import ConfluentProducer
from framework.kafka.errors import CONFLUENT, ClientError
from framework.kafka.transactional import (
    ProducerFenced,
    TransactionAborted,
    TransactionRetriable,
    not_read_to_end,
)
from framework.kernel.kafka_settings import librdkafka_logger

__all__ = ["ConfluentCommittedLog", "ConfluentTransactional"]

_FENCED: Final = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)
_POLL_S: Final = 0.2


def _mapped(exc: ClientError, doing: str) -> ClientError:
    """librdkafka's transactional error (`exc`'s cause) as the layer's: fenced, abort needed,
    or retry."""
    cause = exc.__cause__
    args = cause.args if cause is not None else ()
    error = args[0] if args and isinstance(args[0], KafkaError) else None
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


@contextmanager
def _transactional(doing: str) -> Iterator[None]:
    """`with` this around a transaction call: `ProducerFenced`, `TransactionAborted` or
    `TransactionRetriable` come out of it."""
    try:
        with CONFLUENT:
            yield
    except ClientError as exc:
        raise _mapped(exc, doing) from exc


class ConfluentTransactional(ConfluentProducer):
    """A librdkafka producer with `transactional.id` set (idempotent, acks=all).

    `send` is `ConfluentProducer`'s: a record refused before it is queued raises
    `SendFailed` (`RecordTooLarge`), a fenced producer's too (its abort then says
    fenced); a failed delivery fails the commit, so `flush` is never needed.
    """

    def __init__(self, transactional_id: str, settings: Mapping[str, Any]) -> None:
        self.transactional_id = transactional_id
        self._open = False
        self._closed = False
        super().__init__({**settings, "transactional.id": transactional_id})

    @property
    def in_transaction(self) -> bool:
        """True between `begin` and the end of `commit` or `abort`."""
        return self._open

    def init(self, timeout: float) -> None:
        """`init_transactions`: fences earlier producers of the id, aborts their transaction."""
        with _transactional(f"{self.transactional_id}: init_transactions"):
            self._producer.init_transactions(timeout)

    def begin(self) -> None:
        """`begin_transaction` (local)."""
        with _transactional(f"{self.transactional_id}: begin_transaction"):
            self._producer.begin_transaction()
        self._open = True

    def commit(self, timeout: float) -> None:
        """`commit_transaction` (it flushes first); a retriable failure may be called again."""
        with _transactional(f"{self.transactional_id}: commit_transaction"):
            self._producer.commit_transaction(timeout)
        self._ended()

    def abort(self, timeout: float) -> None:
        """`abort_transaction`: drops what is queued; nothing of it is ever committed."""
        with _transactional(f"{self.transactional_id}: abort_transaction"):
            self._producer.abort_transaction(timeout)
        self._ended()

    def _ended(self) -> None:
        self._open = False
        self._failures.clear()  # reported by the commit, never by a flush

    def close(self, timeout: float | None = None) -> None:
        """Abort an open transaction (best effort, up to `timeout`: default 5 s), drop what is
        queued, then release librdkafka's handle without waiting on the cluster."""
        if self._closed:
            return
        self._closed = True
        wait = 5.0 if timeout is None else timeout
        if self._open:
            # Else the next owner's init_transactions (or the broker's timeout) aborts it.
            with suppress(ClientError):
                self.abort(wait)
        # A fenced (fatal) producer refuses even this; it is released all the same.
        with suppress(ClientError), CONFLUENT:
            self._producer.purge()
        # Not `Producer.close()`: since confluent-kafka 2.16 it aborts an open transaction
        # with no deadline, which does not return while the coordinator is away, nor at all
        # after some failed commits (a node's loop hung in it after a broker restart). The
        # handle's last reference, dropped on a thread of its own, runs `rd_kafka_destroy`:
        # no abort, no flush. This object lets go of it first (its delivery callback, bound
        # to this object, would otherwise keep the handle in a cycle until a collection).
        handle: list[Any] = [self._producer]
        del self._producer, self._produce
        close_aside(handle.clear, self.transactional_id).join(wait)


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
        try:
            with CONFLUENT:
                left = self._read_to_end(timeout)
        except ClientError as exc:
            self.close()
            raise ClientError(f"{self.topic}: unreadable ({exc})", exc.detail) from exc
        if left:  # a fresh reader next time: this one may be stuck (a broker restart)
            self.close()
            raise not_read_to_end(self.topic, left, timeout)
        return self._values.get(key)

    def _read_to_end(self, timeout: float) -> list[int]:
        """Read up to the high watermarks as of now; the partitions left at the deadline."""
        deadline = time.monotonic() + timeout
        reader = self._reading(timeout)
        targets = self._targets(timeout)
        while True:
            left = [p for p, end in targets.items() if self._position(reader, p) < end]
            if not left or time.monotonic() >= deadline:
                return left
            self._apply(reader.poll(_POLL_S))

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

    def _apply(self, message: Any) -> None:
        if message is None:
            return
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                self._eof[message.partition()] = int(message.offset())
                return
            raise ClientError(f"{self.topic}: {error}", client_class="KafkaError")
        self._values[message.key()] = message.value()

    def close(self) -> None:
        """Close both consumers (a later `latest` opens them again and reads from the start)."""
        for consumer in (self._reader, self._ends):
            if consumer is not None:
                with suppress(ClientError), CONFLUENT:
                    consumer.close()
        self._reader = self._ends = None
        self._values = {}
