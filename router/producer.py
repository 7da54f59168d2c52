"""`StreamProducer`: routes fragments to their streams through kafka-python's `KafkaProducer`."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Literal

import structlog
from kafka import KafkaProducer
from kafka.errors import KafkaError

from framework.kafka_settings import kafka_python_settings
from router.errors import ProduceFailed
from router.fragment import ParsedFragment
from router.hashing import stream_for_key
from router.naming import stream_name
from router.provisioning import verify_stream_topics
from router.wire import Watermark, encode_fragment, encode_watermark

__all__ = [
    "Compression",
    "EncodedFragment",
    "ProducerConfig",
    "ProducerStats",
    "StreamProducer",
]

Compression = Literal["gzip", "lz4", "zstd", "snappy", "none"]
_log = structlog.get_logger("sessionizer.producer")


@dataclass(frozen=True)
class ProducerConfig:
    """How the producer batches, compresses and marks time."""

    bootstrap: str
    app: str
    num_streams: int
    linger_ms: int = 20
    batch_size: int = 256 * 1024
    compression: Compression = "lz4"
    # No stream's time may lag the producer's by more than this: a stream whose own
    # latest event time is further behind gets a watermark.  Event time (not the
    # wall clock) keeps replays identical.
    watermark_interval_ms: int = 60_000
    client_properties: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Extra Kafka client properties by their standard names (security settings...)."""

    def __post_init__(self) -> None:
        if self.num_streams < 1:
            raise ValueError(f"num_streams must be >= 1, got {self.num_streams}")
        if self.watermark_interval_ms < 1:
            raise ValueError("watermark_interval_ms must be >= 1")

    def kafka_settings(self) -> dict[str, object]:
        """The `KafkaProducer` settings this config stands for (the benchmark reuses them)."""
        return {
            "bootstrap_servers": self.bootstrap,
            "acks": "all",
            "enable_idempotence": True,
            "linger_ms": self.linger_ms,
            "batch_size": self.batch_size,
            "compression_type": None if self.compression == "none" else self.compression,
            "client_id": f"{self.app}-producer",
            **kafka_python_settings(self.client_properties, KafkaProducer.DEFAULT_CONFIG),
        }


@dataclass(frozen=True, slots=True)
class EncodedFragment:
    """A fragment ready to send: its stream index and record bytes."""

    stream: int
    key: bytes
    value: bytes
    timestamp_ms: int


@dataclass
class ProducerStats:
    """What the thesis counted: lines read, parsed, rejected (by reason) and sent."""

    read: int = 0
    parsed: int = 0
    rejected: int = 0
    sent: int = 0
    reasons: Counter[str] = field(default_factory=Counter)

    def reject(self, reason: str) -> None:
        """Count one rejected line."""
        self.rejected += 1
        self.reasons[reason] += 1

    def as_dict(self) -> dict[str, object]:
        """The `produce --json` shape."""
        return {
            "read": self.read,
            "parsed": self.parsed,
            "rejected": self.rejected,
            "sent": self.sent,
            "reasons": dict(sorted(self.reasons.items())),
        }


class StreamProducer:
    """Sends fragments to `<app>.stream.NNNN` by the hash contract, plus watermarks.

    `sent` counts fragments the brokers acknowledged (acks=all), settled at each
    `flush()`; `flush()` raises `ProduceFailed` if any send failed, so a caller
    never reports a fragment as delivered that was not.
    """

    def __init__(self, config: ProducerConfig, *, verify: bool = True) -> None:
        self.config = config
        if verify:
            verify_stream_topics(
                config.bootstrap,
                config.app,
                config.num_streams,
                properties=config.client_properties,
            )
        self.stats = ProducerStats()
        self._topics = [stream_name(config.app, i) for i in range(config.num_streams)]
        self._lock = threading.Lock()  # the delivery callbacks run on kafka-python's thread
        self._failures: list[str] = []
        self._fragment_failures = 0
        self._unsettled = 0  # fragments sent since the last flush
        self._stream_time_ms = -1
        self._checked_ms: int | None = None  # producer time at the last lag check
        self._stream_max_ms = [-1] * config.num_streams  # latest event time sent per stream
        self._producer = KafkaProducer(**config.kafka_settings())

    def encode(self, fragment: ParsedFragment) -> EncodedFragment:
        """Route and encode a fragment; raises `MalformedLine("unencodable")`."""
        key, value = encode_fragment(fragment)
        stream = stream_for_key(fragment.key, self.config.num_streams)
        return EncodedFragment(stream, key, value, fragment.timestamp_ms)

    def send(self, fragment: ParsedFragment) -> None:
        """Send one fragment to its stream (asynchronously; see `flush`)."""
        self.send_encoded(self.encode(fragment))

    def send_encoded(self, fragment: EncodedFragment) -> None:
        """Send a fragment `encode` prepared."""
        stream, key, value = fragment.stream, fragment.key, fragment.value
        future = self._producer.send(
            self._topics[stream],
            key=key,
            value=value,
            partition=0,
            timestamp_ms=fragment.timestamp_ms,
        )
        # No success callback: flush() settles every record, so `sent` is counted there;
        # a per-record callback would contend with kafka-python's I/O thread.
        future.add_errback(self._failed, self._topics[stream])
        self._unsettled += 1
        if fragment.timestamp_ms > self._stream_max_ms[stream]:
            self._stream_max_ms[stream] = fragment.timestamp_ms
        self._advance(fragment.timestamp_ms)

    def send_watermark(
        self, timestamp_ms: int, *, end: bool = False, streams: Iterable[int] | None = None
    ) -> None:
        """Write a watermark record to the given streams (default: every stream)."""
        value, headers = encode_watermark(Watermark(timestamp_ms, end))
        for stream in range(self.config.num_streams) if streams is None else streams:
            topic = self._topics[stream]
            future = self._producer.send(
                topic, value=value, headers=headers, partition=0, timestamp_ms=timestamp_ms
            )
            future.add_errback(self._failed, topic, fragment=False)
            self._stream_max_ms[stream] = max(self._stream_max_ms[stream], timestamp_ms)

    def end_of_input(self) -> None:
        """Mark the end of bounded input on every stream and wait for delivery."""
        self.send_watermark(max(self._stream_time_ms, 0), end=True)
        self.flush()

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every record is acknowledged; raise `ProduceFailed` if any failed."""
        try:
            self._producer.flush(timeout=timeout)
        except KafkaError as exc:
            raise ProduceFailed(self.config.app, f"flush did not complete: {exc}") from exc
        with self._lock:
            failures, self._failures = self._failures, []
            fragment_failures, self._fragment_failures = self._fragment_failures, 0
        self.stats.sent += self._unsettled - fragment_failures
        self._unsettled = 0
        if failures:
            raise ProduceFailed(self.config.app, f"{len(failures)} sends failed: {failures[:3]}")

    def close(self) -> None:
        """Flush and close the underlying producer."""
        try:
            self.flush()
        finally:
            self._producer.close()

    def __enter__(self) -> StreamProducer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self._producer.close(timeout=5)

    def _advance(self, timestamp_ms: int) -> None:
        if timestamp_ms <= self._stream_time_ms:
            return
        self._stream_time_ms = timestamp_ms
        interval = self.config.watermark_interval_ms
        if self._checked_ms is None:
            self._checked_ms = timestamp_ms
        elif timestamp_ms - self._checked_ms >= interval:
            self._checked_ms = timestamp_ms
            behind = [s for s, t in enumerate(self._stream_max_ms) if timestamp_ms - t > interval]
            if behind:
                self.send_watermark(timestamp_ms, streams=behind)

    def _failed(self, topic: str, exc: BaseException, *, fragment: bool = True) -> None:
        _log.warning("send_failed", topic=topic, error=str(exc))
        with self._lock:
            self._failures.append(f"{topic}: {exc}")
            self._fragment_failures += fragment
