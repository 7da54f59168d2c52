"""The Kafka side of `StreamProducer`: one transport over the client layer's producer.

A transport sends records to the stream topics by index (partition 0, the given
record timestamp), counts what failed, and fetches the metadata of every stream
topic in one go before the first send. `StreamProducer` does the routing,
encoding, watermarks and counting on top. The client (kafka-python or
confluent-kafka) is the layer's `RecordProducer` (`framework.kafka`), chosen by
`open_producer` from `ProducerConfig.kafka_client`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple, Protocol

import structlog

from framework.kafka.errors import ClientError, FlushIncomplete, SendFailed
from framework.kafka.producer import (
    DeliveryFailure,
    Headers,
    StreamRecordProducer,
    TopicSend,
    open_producer,
)
from router.errors import ProduceFailed, ProvisioningError
from router.provisioning import check_stream_count

if TYPE_CHECKING:
    from router.producer import ProducerConfig

__all__ = [
    "FailedSends",
    "KafkaTransport",
    "ProducerTransport",
    "open_transport",
]

_log = structlog.get_logger("sessionizer.producer")
_METADATA_TIMEOUT_S = 30.0


class FailedSends(NamedTuple):
    """What failed since the last look or flush (`flush`, `failures`)."""

    failed: int
    """Fragments not delivered."""
    failures: list[str]
    """Why each record not delivered failed, fragments' and watermarks' alike."""
    timestamps_refused: int = 0
    """Records the broker refused for their timestamp (`TimestampRefused`), of `failures`."""


class ProducerTransport(Protocol):
    """What `StreamProducer` needs from a Kafka client."""

    def prepare(self, *, verify: bool) -> None:
        """Check the app's stream count (when `verify`) and learn every stream's metadata."""

    def send(
        self,
        stream: int,
        key: bytes | None,
        value: bytes,
        timestamp_ms: int,
        headers: Headers | None,
    ) -> None:
        """Queue one record for a stream (partition 0); a record with no key is a watermark."""

    def fragment_sender(self) -> TopicSend:
        """`send` without headers, one call into the client per record; it raises the client
        layer's `SendFailed`, which `refused` turns into this transport's error."""

    def refused(self, stream: int, exc: SendFailed) -> ProduceFailed:
        """The error for a record of `stream` the client refused before queueing it."""

    def flush(self, timeout: float | None) -> FailedSends:
        """Wait for every queued record; return what failed since the last flush.

        Raises `ProduceFailed` when not everything was settled in `timeout` seconds.
        """

    def failures(self) -> FailedSends:
        """What is known to have failed since the last look or flush, without waiting."""

    def close(self, timeout: float | None = None) -> None:
        """Release the client (the caller flushed first, or is giving up)."""


def open_transport(config: ProducerConfig, topics: Sequence[str]) -> ProducerTransport:
    """The transport over the client `config.kafka_client` resolves to (`auto`: confluent-kafka
    when installed)."""
    try:
        producer = open_producer(
            config.kafka_client,
            kafka_python=config.kafka_settings,
            confluent=config.confluent_settings,
        )
    except ClientError as exc:
        raise _unreachable(config.bootstrap, exc) from exc
    return KafkaTransport(config, topics, producer)


def _unreachable(bootstrap: str, exc: ClientError) -> ProvisioningError:
    return ProvisioningError(f"cannot reach Kafka at {bootstrap}: {exc}; is the cluster up?")


class KafkaTransport:
    """A `ProducerTransport` over the client layer's producer; failures are settled at `flush`."""

    def __init__(
        self, config: ProducerConfig, topics: Sequence[str], producer: StreamRecordProducer
    ) -> None:
        self._config = config
        self._topics = list(topics)
        self._producer = producer
        self._send = producer.send

    def prepare(self, *, verify: bool) -> None:
        """Check the stream count from one metadata request, then learn every stream's."""
        if not verify:
            return
        config = self._config
        try:
            names = self._producer.topic_names(_METADATA_TIMEOUT_S)
        except ClientError as exc:
            raise _unreachable(config.bootstrap, exc) from exc
        check_stream_count(names, config.app, config.num_streams)
        self._producer.warm_metadata(self._topics)

    def send(
        self,
        stream: int,
        key: bytes | None,
        value: bytes,
        timestamp_ms: int,
        headers: Headers | None,
    ) -> None:
        """Queue one record (the client batches it)."""
        try:
            self._send(
                self._topics[stream],
                key,
                value,
                headers=headers,
                partition=0,
                timestamp_ms=timestamp_ms,
            )
        except SendFailed as exc:  # refused before queueing (e.g. a record over the limit)
            raise self.refused(stream, exc) from exc

    def fragment_sender(self) -> TopicSend:
        """The client's `topic_sender` for the stream topics."""
        return self._producer.topic_sender(self._topics)

    def refused(self, stream: int, exc: SendFailed) -> ProduceFailed:
        """`ProduceFailed` naming the app and the stream topic."""
        return ProduceFailed(self._config.app, f"cannot send to {self._topics[stream]}: {exc}")

    def flush(self, timeout: float | None) -> FailedSends:
        """Wait for every acknowledgement; report the failures since the last flush."""
        try:
            failed = self._producer.flush(timeout)
        except FlushIncomplete as exc:
            raise ProduceFailed(self._config.app, f"flush did not complete: {exc}") from exc
        return _failed_sends(failed)

    def failures(self) -> FailedSends:
        """The failures the client has seen since the last look or flush, without waiting."""
        return _failed_sends(self._producer.take_failures())

    def close(self, timeout: float | None = None) -> None:
        """Close the producer (waits up to `timeout` for what is still queued)."""
        self._producer.close(timeout)


def _failed_sends(failed: list[DeliveryFailure]) -> FailedSends:
    """The failures, logged and counted."""
    failures = []
    for failure in failed:
        _log.warning("send_failed", topic=failure.topic, error=failure.error)
        failures.append(f"{failure.topic}: {failure.error}")
    refused = sum(failure.timestamp_refused for failure in failed)
    return FailedSends(sum(f.key is not None for f in failed), failures, refused)
