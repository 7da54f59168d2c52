"""`StreamProducer`'s transport over confluent-kafka (librdkafka).

Same records as the kafka-python transport (topic, partition 0, key, value,
headers, record timestamp = event time) and the same delivery rule: `flush`
reports every record the brokers did not acknowledge (acks=all, idempotent),
and raises `ProduceFailed` when the queue did not drain in time. librdkafka
reports only failed deliveries (`delivery.report.only.error`), through one bound
method, so a successful record costs no Python call; a full local queue is
drained by serving librdkafka's events, then the send is retried.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import structlog
from confluent_kafka import KafkaError, KafkaException, Producer

from framework.kernel.kafka_settings import librdkafka_logger
from router.errors import ProduceFailed, ProvisioningError
from router.producer_transport import Headers, check_stream_count

if TYPE_CHECKING:
    from router.producer import ProducerConfig

__all__ = ["ConfluentTransport"]

_log = structlog.get_logger("sessionizer.producer")
_METADATA_TIMEOUT_S = 30.0
_FULL_QUEUE_WAIT_S = 0.05


class ConfluentTransport:
    """confluent-kafka's `Producer`; delivery failures are served by `poll`/`flush` here."""

    def __init__(self, config: ProducerConfig, topics: Sequence[str]) -> None:
        self._config = config
        self._topics = list(topics)
        self._failures: list[str] = []
        self._fragment_failures = 0
        settings = config.confluent_settings()
        # librdkafka waits this long for an acknowledgement before failing a record.
        self._delivery_timeout_s = int(str(settings.get("delivery.timeout.ms", 300_000))) / 1000
        self._producer = Producer(
            {
                **settings,
                "delivery.report.only.error": True,
                "on_delivery": self._delivered,
                "logger": librdkafka_logger(),  # its lines as log records, not stderr text
            }
        )
        self._produce = self._producer.produce

    def prepare(self, *, verify: bool) -> None:
        """One metadata request for the whole cluster: checks the count, warms every topic."""
        if not verify:
            return
        try:
            metadata = self._producer.list_topics(timeout=_METADATA_TIMEOUT_S)
        except KafkaException as exc:
            raise ProvisioningError(
                f"cannot reach Kafka at {self._config.bootstrap}: {exc}; is the cluster up?"
            ) from exc
        config = self._config
        check_stream_count(list(metadata.topics), config.app, config.num_streams)

    def send(
        self,
        stream: int,
        key: bytes | None,
        value: bytes,
        timestamp_ms: int,
        headers: Headers | None,
    ) -> None:
        """Queue one record; when librdkafka's queue is full, serve it until there is room."""
        try:
            self._produce(
                self._topics[stream], value, key, 0, timestamp=timestamp_ms, headers=_wide(headers)
            )
        except BufferError:
            self._send_when_room(stream, key, value, timestamp_ms, headers)
        except KafkaException as exc:  # refused before queueing (e.g. a record over the limit)
            raise ProduceFailed(
                self._config.app, f"cannot send to {self._topics[stream]}: {exc}"
            ) from exc

    def flush(self, timeout: float | None) -> tuple[int, list[str]]:
        """Wait until librdkafka's queue is empty; report the failures since the last flush."""
        left = self._producer.flush(-1 if timeout is None else timeout)
        if left:
            raise ProduceFailed(
                self._config.app, f"flush did not complete: {left} records still queued"
            )
        failures, self._failures = self._failures, []
        fragments, self._fragment_failures = self._fragment_failures, 0
        return fragments, failures

    def close(self, timeout: float | None = None) -> None:
        """Wait (up to `timeout`, default: until delivered or failed) for what is queued, then
        stop librdkafka's threads (left running, they retry a gone broker for ever)."""
        self._producer.flush(-1 if timeout is None else timeout)
        self._producer.purge()  # what a timeout left queued is not waited for again
        # Producer.close() is new in confluent-kafka 2.13 (Quix Streams, a benchmark peer, pins
        # < 2.13); before it, librdkafka's threads stop when the handle is garbage-collected.
        close = getattr(self._producer, "close", None)
        if close is not None:
            close()

    def _send_when_room(
        self,
        stream: int,
        key: bytes | None,
        value: bytes,
        timestamp_ms: int,
        headers: Headers | None,
    ) -> None:
        topic = self._topics[stream]
        deadline = time.monotonic() + self._delivery_timeout_s
        while True:
            self._producer.poll(_FULL_QUEUE_WAIT_S)
            try:
                self._produce(topic, value, key, 0, timestamp=timestamp_ms, headers=_wide(headers))
                return
            except KafkaException as exc:
                raise ProduceFailed(self._config.app, f"cannot send to {topic}: {exc}") from exc
            except BufferError:
                if time.monotonic() >= deadline:
                    raise ProduceFailed(
                        self._config.app, f"cannot send to {topic}: the local queue stayed full"
                    ) from None

    def _delivered(self, error: KafkaError | None, message: Any) -> None:
        if error is None:
            return
        topic = message.topic()
        _log.warning("send_failed", topic=topic, error=str(error))
        self._failures.append(f"{topic}: {error}")
        self._fragment_failures += message.key() is not None


def _wide(headers: Headers | None) -> list[tuple[str, str | bytes | None]] | None:
    """Headers as confluent-kafka types them (a wider value type than the wire's)."""
    return None if headers is None else list(headers)
