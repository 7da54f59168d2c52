"""`KafkaSink`: a node's sessions to `<app>.sessions`, dead letters to `<app>.deadletter`.

The sink is client-agnostic: it writes through the client layer's
`RecordProducer` (`framework.kafka`), kafka-python or confluent-kafka, which
`open_kafka_sink` chooses. Sends are asynchronous; every failed delivery since
the last `flush` comes back there, so a failure can never be reported once and
then forgotten: `flush` raises `SinkError` for any send that did not reach the
brokers within `delivery_timeout`, and the node then rewinds instead of
committing. A session the broker refuses as too large is the one permanent
failure: a session becomes its reference dead letter, a dead letter is sent
again without the original value, and `flush` goes on.

A producer that could not deliver may never deliver again: kafka-python's stays
stuck on a topic deleted and created again (a fresh producer writes at once). So
when `open_kafka_sink` made the sink, each failed flush or send puts a fresh
producer in its place; the old one is closed aside, dropping what it still held
(the node rewinds every stream whose output that was). If no fresh producer can be
made (Kafka away), the old one is kept and the next failure tries again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import structlog

from framework.kafka.closing import close_aside
from framework.kafka.errors import ClientError, FlushIncomplete, RecordTooLarge, SendFailed
from framework.kafka.producer import RecordProducer, open_producer
from framework.kernel.transport import KafkaClient
from sessionizer.errors import SinkError
from sessionizer.records import FinishedSession
from sessionizer.sinks import (
    DEFAULT_MAX_MESSAGE_BYTES,
    BrokerSink,
    DeadLetter,
)

__all__ = ["KafkaSink", "OutputProducerSettings", "open_kafka_sink"]

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
        producer: RecordProducer,
        sessions_topic: str,
        deadletter_topic: str,
        *,
        delivery_timeout: float = 30.0,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        reopen: Callable[[], RecordProducer] | None = None,
    ) -> None:
        super().__init__(
            sessions_topic,
            deadletter_topic,
            delivery_timeout=delivery_timeout,
            max_message_bytes=max_message_bytes,
        )
        self._producer = producer
        self._reopen = reopen
        """Makes a fresh producer after a failure (None: keep this one: a transactional one)."""
        self._sent = 0  # sends since the last flush
        self._log = structlog.get_logger(__name__)

    def flush(self) -> None:
        """Wait until every send since the last flush is acknowledged by all in-sync replicas."""
        sent, self._sent = self._sent, 0
        topics = f"{self.sessions_topic}/{self.deadletter_topic}"
        try:
            failures = self._producer.flush(self.delivery_timeout)
        except FlushIncomplete as exc:
            left = sent if exc.left is None else exc.left
            self._replace_producer(f"a flush left {left} sends unacknowledged")
            raise SinkError(
                f"{left} sends to {topics} were not acknowledged within "
                f"{self.delivery_timeout:g} s ({exc.detail}); state is not committed, so their "
                "streams are rewound and replayed"
            ) from exc
        transient = [f for f in failures if not f.too_large or f.token is None]
        if transient:
            self._replace_producer(f"{len(transient)} sends failed")
            raise SinkError(
                f"{len(transient)} of {sent} sends to {topics} failed (first: "
                f"{transient[0].detail}); state is not committed, so their streams are rewound "
                "and replayed"
            )
        for failure in failures:
            item = failure.token
            assert isinstance(item, FinishedSession | DeadLetter)  # what `_send` gave as token
            self._refused(item, failure.detail)
        if failures:  # flush what stands for the items the broker refused
            self.flush()

    def _replace_producer(self, why: str) -> None:
        """Put a fresh producer in the failed one's place, if one can be made now."""
        if self._reopen is None:
            return
        try:
            fresh = self._reopen()
        except ClientError as exc:
            self._log.warning("sink_producer_kept", reason=why, error=str(exc))
            return
        failed, self._producer, self._sent = self._producer, fresh, 0
        close_aside(lambda: failed.close(0), "failed-sink-producer")
        self._log.info("sink_producer_replaced", reason=why)

    def close(self) -> None:
        """Close the producer, waiting briefly for what is queued (the caller flushed first).

        What is still unsent then is dropped: its streams' state was not committed.
        """
        self._producer.close(min(self.delivery_timeout, 5.0))

    def _send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes]] | None,
        item: FinishedSession | DeadLetter,
    ) -> None:
        try:
            self._producer.send(topic, key, value, headers=headers, token=item)
        except RecordTooLarge as exc:
            self._refused(item, exc.detail)
            return
        except SendFailed as exc:  # no metadata or buffer space in time
            self._replace_producer(f"a send to {topic} failed")
            raise SinkError(
                f"cannot send to {topic} ({exc.detail}); state is not committed, so the stream is "
                "rewound and replayed"
            ) from exc
        self._sent += 1


@dataclass(frozen=True)
class OutputProducerSettings:
    """The settings of a producer of a node's output (acks=all, idempotent, lz4, large
    batches), per client; the user's properties win. The exactly-once producer adds its
    transactional id to these (`framework.node.exactly_once`)."""

    bootstrap: str
    client_id: str
    delivery_timeout: float
    max_message_bytes: int
    largest_record: int
    """The largest record sent (an exactly-once state record may be over `max_message_bytes`)."""
    properties: Mapping[str, str]
    api_version: tuple[int, ...] | None = None
    """kafka-python: the brokers' version, when known. Without it `KafkaProducer()` connects
    in its constructor, waiting up to 30 s while Kafka is away."""

    def kafka_python(self) -> dict[str, Any]:
        """`KafkaProducer`'s keyword arguments."""
        from framework.kafka.kafka_python import OnePartitionFirst, producer_settings

        timeout_ms = int(self.delivery_timeout * 1000)
        return {
            "bootstrap_servers": self.bootstrap,
            "acks": "all",
            "enable_idempotence": True,
            "linger_ms": 20,
            "compression_type": "lz4",
            "client_id": self.client_id,
            "delivery_timeout_ms": timeout_ms,
            "request_timeout_ms": max(1000, int(timeout_ms * _REQUEST_SHARE)),
            # `send` blocks for metadata or buffer space at most this long, then raises.
            "max_block_ms": timeout_ms,
            "max_request_size": self.largest_record + 64 * 1024,
            # The user's settings last: theirs win, batch_size and partitioner included.
            "batch_size": min(_BATCH_BYTES, self.max_message_bytes),
            "partitioner": OnePartitionFirst(),
            **({"api_version": self.api_version} if self.api_version else {}),
            **producer_settings(dict(self.properties)),
        }

    def confluent(self) -> dict[str, Any]:
        """librdkafka's properties."""
        return {
            "bootstrap.servers": self.bootstrap,
            "client.id": self.client_id,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 20,
            "compression.type": "lz4",
            "delivery.timeout.ms": int(self.delivery_timeout * 1000),
            "message.max.bytes": self.largest_record + 64 * 1024,
            # The user's properties last: theirs win (the reserved ones cannot be set).
            **self.properties,
        }


def open_kafka_sink(
    client: KafkaClient,
    bootstrap: str,
    sessions_topic: str,
    deadletter_topic: str,
    *,
    client_id: str,
    delivery_timeout: float = 30.0,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    properties: Mapping[str, str] | None = None,
) -> KafkaSink:
    """A `KafkaSink` over the `client` choice (`OutputProducerSettings`)."""
    settings = OutputProducerSettings(
        bootstrap,
        client_id,
        delivery_timeout,
        max_message_bytes,
        largest_record=max_message_bytes,
        properties=dict(properties or {}),
    )
    first = open_producer(client, kafka_python=settings.kafka_python, confluent=settings.confluent)
    # A fresh producer is made after a failure, maybe while Kafka is away: told the version
    # the first one found, kafka-python's does not wait for the brokers in its constructor.
    again = replace(settings, api_version=getattr(first, "api_version", None))

    def producer() -> RecordProducer:
        return open_producer(client, kafka_python=again.kafka_python, confluent=again.confluent)

    return KafkaSink(
        first,
        sessions_topic,
        deadletter_topic,
        delivery_timeout=delivery_timeout,
        max_message_bytes=max_message_bytes,
        reopen=producer,
    )
