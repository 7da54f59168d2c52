"""The Kafka side of `StreamProducer`: one seam, two clients (kafka-python, confluent-kafka).

A transport sends records to the stream topics by index (partition 0, the given
record timestamp), counts what failed, and fetches the metadata of every stream
topic in one go before the first send. `StreamProducer` does the routing,
encoding, watermarks and counting on top, identically for both.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Protocol

import structlog
from kafka import KafkaProducer
from kafka.errors import KafkaError

from router.errors import ProduceFailed, ProvisioningError, StreamCountMismatch
from router.naming import stream_index
from router.provisioning import verify_stream_topics

if TYPE_CHECKING:
    from router.producer import ProducerConfig

__all__ = [
    "Headers",
    "KafkaPythonTransport",
    "ProducerTransport",
    "check_stream_count",
    "open_transport",
    "warm_metadata",
]

Headers = list[tuple[str, bytes]]
_log = structlog.get_logger("sessionizer.producer")


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

    def flush(self, timeout: float | None) -> tuple[int, list[str]]:
        """Wait for every queued record; return (fragments failed, failure texts) since the last.

        Raises `ProduceFailed` when not everything was settled in `timeout` seconds.
        """

    def close(self, timeout: float | None = None) -> None:
        """Release the client (the caller flushed first, or is giving up)."""


def open_transport(config: ProducerConfig, topics: Sequence[str]) -> ProducerTransport:
    """The transport `config.transport` resolves to (`auto`: confluent-kafka when installed)."""
    from framework.kernel.transport import resolve_transport

    if resolve_transport(config.transport) == "confluent":
        from router.confluent_producer import ConfluentTransport

        return ConfluentTransport(config, topics)
    return KafkaPythonTransport(config, topics)


def check_stream_count(names: Sequence[str], app: str, num_streams: int) -> None:
    """Raise unless the topic `names` hold exactly `num_streams` streams of `app`."""
    existing = 0
    for name in names:
        try:
            stream_index(name, app=app)
        except ValueError:
            continue
        existing += 1
    if existing == 0:
        raise ProvisioningError(
            f"app {app!r} has no stream topics; run `sessionizer streams create --count N` first"
        )
    if existing != num_streams:
        raise StreamCountMismatch(app, expected=existing, configured=num_streams)


def warm_metadata(producer: KafkaProducer, topics: Sequence[str]) -> None:
    """Learn every topic's partitions in one metadata request, not one blocking send per topic.

    kafka-python's first `send` to a topic adds it to the tracked topics and waits
    for a metadata round trip, one topic at a time. Adding them all first (through
    the I/O thread's thread-safe queue) makes the first wait fetch them together.
    """
    sender = producer._sender  # kafka-python has no public bulk call
    for topic in topics:
        sender.add_topic(topic)
    for topic in topics:
        producer.partitions_for(topic)


class KafkaPythonTransport:
    """kafka-python's `KafkaProducer`; delivery failures come back on its I/O thread."""

    def __init__(self, config: ProducerConfig, topics: Sequence[str]) -> None:
        self._config = config
        self._topics = list(topics)
        self._lock = threading.Lock()
        self._failures: list[str] = []
        self._fragment_failures = 0
        # One errback per stream and kind, built once: no per-record closure.
        self._errbacks = [
            (partial(self._failed, topic, False), partial(self._failed, topic, True))
            for topic in self._topics
        ]
        try:
            self._producer = KafkaProducer(**config.kafka_settings())
        except KafkaError as exc:
            raise ProvisioningError(
                f"cannot reach Kafka at {config.bootstrap}: {exc}; is the cluster up?"
            ) from exc

    def prepare(self, *, verify: bool) -> None:
        """Check the stream count with an admin client, then fetch all metadata at once."""
        if verify:
            config = self._config
            verify_stream_topics(
                config.bootstrap,
                config.app,
                config.num_streams,
                properties=config.client_properties,
            )
            warm_metadata(self._producer, self._topics)

    def send(
        self,
        stream: int,
        key: bytes | None,
        value: bytes,
        timestamp_ms: int,
        headers: Headers | None,
    ) -> None:
        """Queue one record (kafka-python batches it; the I/O thread sends)."""
        try:
            future = self._producer.send(
                self._topics[stream],
                value=value,
                key=key,
                headers=headers,
                partition=0,
                timestamp_ms=timestamp_ms,
            )
        except KafkaError as exc:  # refused before queueing (e.g. a record over the limit)
            raise ProduceFailed(
                self._config.app, f"cannot send to {self._topics[stream]}: {exc}"
            ) from exc
        # Only an errback: success is settled by flush(), and a per-record success
        # callback would contend with the I/O thread for the GIL.
        future.add_errback(self._errbacks[stream][key is not None])

    def flush(self, timeout: float | None) -> tuple[int, list[str]]:
        """Wait for every acknowledgement; report the failures since the last flush."""
        try:
            self._producer.flush(timeout=timeout)
        except KafkaError as exc:
            raise ProduceFailed(self._config.app, f"flush did not complete: {exc}") from exc
        with self._lock:
            failures, self._failures = self._failures, []
            fragments, self._fragment_failures = self._fragment_failures, 0
        return fragments, failures

    def close(self, timeout: float | None = None) -> None:
        """Close the producer (waits up to `timeout` for what is still queued)."""
        self._producer.close(timeout=timeout)

    def _failed(self, topic: str, fragment: bool, exc: BaseException) -> None:
        _log.warning("send_failed", topic=topic, error=str(exc))
        with self._lock:
            self._failures.append(f"{topic}: {exc}")
            self._fragment_failures += fragment
