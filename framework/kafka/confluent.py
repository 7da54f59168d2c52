"""The layer's producer over confluent-kafka (librdkafka's `Producer`)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from confluent_kafka import KafkaError, Producer

from framework.kafka.errors import CONFLUENT, CONFLUENT_SENDING, FlushIncomplete, SendFailed
from framework.kafka.producer import DeliveryFailure, Headers, TopicSend
from framework.kernel.kafka_settings import librdkafka_logger

__all__ = ["ConfluentProducer"]

_TOO_LARGE = (KafkaError.MSG_SIZE_TOO_LARGE,)
_METADATA_TIMEOUT_S = 30.0
_FULL_QUEUE_WAIT_S = 0.05


class ConfluentProducer:
    """librdkafka reports only failed deliveries, through one bound method: a success costs
    no Python call. A full local queue is drained by serving its events, then retried."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self._failures: list[DeliveryFailure] = []
        self._warm = False  # the cluster's metadata was fetched
        # librdkafka waits this long for an acknowledgement before failing a record.
        self._delivery_timeout_s = int(str(settings.get("delivery.timeout.ms", 300_000))) / 1000
        with CONFLUENT:
            self._producer = Producer(
                {
                    **settings,
                    "delivery.report.only.error": True,
                    "on_delivery": self._delivered,
                    "logger": librdkafka_logger(),  # its lines as log records, not stderr text
                }
            )
        self._produce = self._producer.produce

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
        """Queue one record; when librdkafka's queue is full, serve it until there is room."""
        # Every argument, in one call without a keyword dict (on_delivery None: the producer's
        # own report; partition -1: librdkafka's partitioner).
        on_delivery = None if token is None else partial(self._token_delivered, token)
        part = -1 if partition is None else partition
        wide: list[tuple[str, str | bytes | None]] | None = None if headers is None else [*headers]
        deadline = None  # set at the first full queue: no clock read per send
        while True:
            # An `except`, not a `with` (two calls per send; benchmarks/HOT_PATH.md).
            try:
                self._produce(
                    topic, value, key, partition=part, on_delivery=on_delivery,
                    timestamp=timestamp_ms or 0, headers=wide,
                )  # fmt: skip
                return
            except Exception as exc:
                failed = CONFLUENT_SENDING.mapped(exc)  # refused: SendFailed, RecordTooLarge
                if failed is None:
                    raise
                if failed.client_class != "BufferError":
                    raise failed from exc
            now = time.monotonic()
            if deadline is None:
                deadline = now + self._delivery_timeout_s
            elif now >= deadline:
                raise SendFailed("the local queue stayed full") from None
            self._producer.poll(_FULL_QUEUE_WAIT_S)

    def topic_sender(self, topics: Sequence[str]) -> TopicSend:
        """`produce` to partition 0 of `topics[index]`, one Python frame per record; a refusal
        (a full queue, a record too large) goes through `send`, which serves or maps it."""
        names, produce, send = list(topics), self._produce, self.send

        def send_to(index: int, key: bytes | None, value: bytes, timestamp_ms: int) -> None:
            try:
                produce(names[index], value, key, 0, timestamp=timestamp_ms)
            except Exception:  # nothing was queued: the full path retries, serves or maps it
                send(names[index], key, value, partition=0, timestamp_ms=timestamp_ms)

        return send_to

    def take_failures(self) -> list[DeliveryFailure]:
        """Serve librdkafka's reports without waiting; return the failures since the last look."""
        self._producer.poll(0)
        failures, self._failures = self._failures, []
        return failures

    def flush(self, timeout: float | None) -> list[DeliveryFailure]:
        """Wait until librdkafka's queue is empty; return the failures since the last flush."""
        left = self._producer.flush(-1 if timeout is None else timeout)
        failures, self._failures = self._failures, []
        if left:
            raise FlushIncomplete(f"{left} records still queued", left=left)
        return failures

    def close(self, timeout: float | None = None) -> None:
        """Wait (up to `timeout`, default: until delivered or failed) for what is queued, then
        stop librdkafka's threads (left running, they retry a gone broker for ever)."""
        self._producer.flush(-1 if timeout is None else timeout)
        self._producer.purge()  # unconfirmed output is not waited for again
        # Producer.close() is new in confluent-kafka 2.13 (Quix Streams, a benchmark peer, pins
        # < 2.13); before it, librdkafka's threads stop when the handle is garbage-collected.
        close = getattr(self._producer, "close", None)
        if close is not None:
            close()

    def topic_names(self, timeout: float) -> list[str]:
        """Every topic, from one metadata request for the whole cluster."""
        with CONFLUENT:
            metadata = self._producer.list_topics(timeout=timeout)
        self._warm = True
        return list(metadata.topics)

    def warm_metadata(self, topics: Sequence[str]) -> None:
        """One metadata request for the whole cluster warms every topic (none if one was made)."""
        if not self._warm:
            self.topic_names(_METADATA_TIMEOUT_S)

    def _delivered(self, error: KafkaError | None, message: Any) -> None:
        self._token_delivered(None, error, message)

    def _token_delivered(self, token: object, error: KafkaError | None, message: Any) -> None:
        if error is not None:
            text = str(error)
            code = error.code()
            failure = DeliveryFailure(
                message.topic(),
                message.key(),
                text,
                text,
                code in _TOO_LARGE,
                token,
                code == KafkaError.INVALID_TIMESTAMP,
            )
            self._failures.append(failure)
