"""`KafkaSink`: a node's sessions to `<app>.sessions`, dead letters to `<app>.deadletter`.

Sends are asynchronous; the futures of everything sent since the last
`flush` are kept and checked there, so a failure can never be reported once
and then forgotten: `flush` raises `SinkError` for any send that did not reach
the brokers within `delivery_timeout`, and the node then rewinds instead of
committing. A session the broker refuses as too large is the one permanent
failure: a session becomes its reference dead letter, a dead letter is sent
again without the original value, and `flush` goes on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka import KafkaProducer
from kafka.errors import KafkaError, MessageSizeTooLargeError, RecordListTooLargeError
from kafka.partitioner.default import DefaultPartitioner
from kafka.producer.future import FutureRecordMetadata

from sessionizer.errors import SinkError
from sessionizer.records import FinishedSession
from sessionizer.sinks import (
    DEFAULT_MAX_MESSAGE_BYTES,
    BrokerSink,
    DeadLetter,
)

__all__ = ["KafkaSink"]

_TOO_LARGE = (MessageSizeTooLargeError, RecordListTooLargeError)
# A request must be able to time out (and be retried) inside the delivery timeout.
_REQUEST_SHARE = 0.5
# kafka-python wakes its I/O thread (a socket write, then a GIL hand-over) for every new
# batch; at the default 16 KiB that is every few dozen sessions and a sixth of the node's
# loop.  Larger batches, never above the largest message: a batch the broker refuses as
# too large would turn its sessions into reference dead letters.
_BATCH_BYTES = 1024 * 1024


class KafkaSink(BrokerSink):
    """Writes sessions to `sessions_topic` and dead letters to `deadletter_topic`."""

    def __init__(
        self,
        bootstrap: str,
        sessions_topic: str,
        deadletter_topic: str,
        *,
        client_id: str,
        delivery_timeout: float = 30.0,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            sessions_topic,
            deadletter_topic,
            delivery_timeout=delivery_timeout,
            max_message_bytes=max_message_bytes,
        )
        # What was sent since the last flush, with the item each send carried.
        self._pending: list[tuple[FutureRecordMetadata, FinishedSession | DeadLetter]] = []
        timeout_ms = int(delivery_timeout * 1000)
        self._producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=20,
            compression_type="lz4",
            client_id=client_id,
            delivery_timeout_ms=timeout_ms,
            request_timeout_ms=max(1000, int(timeout_ms * _REQUEST_SHARE)),
            # `send` blocks for metadata or buffer space at most this long, then raises.
            max_block_ms=timeout_ms,
            max_request_size=max_message_bytes + 64 * 1024,
            # The user's settings last: theirs win, batch_size and partitioner included.
            **{
                "batch_size": min(_BATCH_BYTES, max_message_bytes),
                "partitioner": _OnePartitionFirst(),
                **(settings or {}),
            },
        )

    def flush(self) -> None:
        """Wait until every send since the last flush is acknowledged by all in-sync replicas."""
        pending, self._pending = self._pending, []
        try:
            self._producer.flush(timeout=self.delivery_timeout)
        except KafkaError as exc:
            raise SinkError(
                f"{len(pending)} sends to {self.sessions_topic}/{self.deadletter_topic} were not "
                f"acknowledged within {self.delivery_timeout:g} s ({exc!r}); state is not "
                "committed, so their streams are rewound and replayed"
            ) from exc
        failed = [(future, item) for future, item in pending if future.failed()]
        transient = [future for future, _ in failed if not _too_large(future)]
        for future, item in failed:
            if _too_large(future):
                self._refused(item, repr(future.exception))
        if transient:
            self._pending.clear()
            raise SinkError(
                f"{len(transient)} of {len(pending)} sends to {self.sessions_topic}/"
                f"{self.deadletter_topic} failed (first: {transient[0].exception!r}); state is "
                "not committed, so their streams are rewound and replayed"
            )
        if self._pending:  # what stands for the items the broker refused
            self.flush()

    def close(self) -> None:
        """Close the producer without waiting for unsent records (the caller flushed first)."""
        self._producer.close(timeout=min(self.delivery_timeout, 5.0))

    def _send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes]] | None,
        item: FinishedSession | DeadLetter,
    ) -> None:
        try:
            future = self._producer.send(topic, key=key, value=value, headers=headers)
        except _TOO_LARGE as exc:
            self._refused(item, repr(exc))
            return
        except KafkaError as exc:  # no metadata or buffer space within max_block_ms
            raise SinkError(
                f"cannot send to {topic} ({exc!r}); state is not committed, so the stream is "
                "rewound and replayed"
            ) from exc
        self._pending.append((future, item))


class _OnePartitionFirst(DefaultPartitioner):  # type: ignore[misc]  # kafka-python is untyped
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


def _too_large(future: FutureRecordMetadata) -> bool:
    return isinstance(future.exception, _TOO_LARGE)
