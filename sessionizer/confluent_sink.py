"""`ConfluentSink`: the `KafkaSink` contract over confluent-kafka (librdkafka).

Same topics, keys, values and headers as `sessionizer.kafka_sink.KafkaSink`,
and the same rule: `flush` raises `SinkError` if anything sent since the last
flush was not acknowledged by all in-sync replicas within `delivery_timeout`.
librdkafka reports each delivery through one bound method that only records
failures; a session the broker refuses as too large becomes its reference
dead letter, a dead letter is sent again without its original value.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from framework.kernel.kafka_settings import librdkafka_logger
from sessionizer.errors import SinkError
from sessionizer.records import FinishedSession
from sessionizer.sinks import (
    DEFAULT_MAX_MESSAGE_BYTES,
    BrokerSink,
    DeadLetter,
)

__all__ = ["ConfluentSink"]

_TOO_LARGE = (KafkaError.MSG_SIZE_TOO_LARGE,)


class ConfluentSink(BrokerSink):
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
        # Sessions in flight since the last flush, by session id (unique): a failed delivery
        # report is matched to its session by key. Dead letters (rare, keys not unique)
        # carry their own report callback instead.
        self._sessions: dict[bytes, FinishedSession] = {}
        self._failures: list[tuple[KafkaError, FinishedSession | DeadLetter | None]] = []
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": client_id,
                "logger": librdkafka_logger(),  # its lines as log records, not stderr text
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 20,
                "compression.type": "lz4",
                "delivery.timeout.ms": int(delivery_timeout * 1000),
                "message.max.bytes": max_message_bytes + 64 * 1024,
                # The user's properties last: theirs win (the reserved ones cannot be set).
                **(settings or {}),
            }
        )

    def flush(self) -> None:
        """Wait until every send since the last flush is acknowledged; else raise `SinkError`."""
        left = self._producer.flush(self.delivery_timeout)
        self._sessions = {}
        failures, self._failures = self._failures, []
        if left:
            raise SinkError(
                f"{left} sends to {self.sessions_topic}/{self.deadletter_topic} were not "
                f"acknowledged within {self.delivery_timeout:g} s; state is not committed, so "
                "their streams are rewound and replayed"
            )
        transient = [e for e, item in failures if item is None or e.code() not in _TOO_LARGE]
        if transient:
            raise SinkError(
                f"{len(transient)} sends to {self.sessions_topic}/{self.deadletter_topic} failed "
                f"(first: {transient[0]}); state is not committed, so their streams are rewound "
                "and replayed"
            )
        for error, item in failures:
            if item is not None:
                self._refused(item, str(error))
        if failures:  # flush what stands for the items the broker refused
            self.flush()

    def close(self) -> None:
        """Wait briefly for what is still queued (the caller flushed first)."""
        self._producer.flush(min(self.delivery_timeout, 5.0))
        self._producer.purge()  # unconfirmed output: its streams' state was not committed
        close = getattr(self._producer, "close", None)  # confluent-kafka >= 2.13 only
        if close is not None:
            close()

    def _send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes]] | None,
        item: FinishedSession | DeadLetter,
    ) -> None:
        report = self._delivered
        if isinstance(item, DeadLetter):
            report = lambda error, message: self._letter_delivered(error, item)  # noqa: E731
        deadline = None  # set at the first full queue: no clock read per send
        while True:
            try:
                self._producer.produce(
                    topic, value=value, key=key, headers=_headers(headers), on_delivery=report
                )
                break
            except BufferError:  # the local queue is full: serve delivery reports, then retry
                now = time.monotonic()
                if deadline is None:
                    deadline = now + self.delivery_timeout
                elif now >= deadline:
                    full = f"cannot send to {topic}: the local queue stayed full"
                    raise SinkError(full) from None
                self._producer.poll(0.1)
            except KafkaException as exc:
                if exc.args and exc.args[0].code() in _TOO_LARGE:
                    self._refused(item, str(exc))
                    return
                raise SinkError(f"cannot send to {topic} ({exc}); the stream is rewound") from exc
        if isinstance(item, FinishedSession) and key is not None:
            self._sessions[key] = item  # `emit` keys a session by its id in UTF-8
        self._producer.poll(0)  # serve delivery reports as we go

    def _delivered(self, error: KafkaError | None, message: Any) -> None:
        if error is not None:
            self._failures.append((error, self._sessions.get(message.key())))

    def _letter_delivered(self, error: KafkaError | None, letter: DeadLetter) -> None:
        if error is not None:
            self._failures.append((error, letter))


def _headers(
    headers: list[tuple[str, bytes]] | None,
) -> list[tuple[str, str | bytes | None]] | None:
    """Headers as confluent-kafka types them (a wider value type than ours)."""
    return None if headers is None else list(headers)
