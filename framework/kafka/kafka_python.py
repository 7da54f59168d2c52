"""The layer's producer over kafka-python (`KafkaProducer`), and its partitioner."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from kafka import KafkaAdminClient, KafkaProducer
from kafka.errors import KafkaTimeoutError
from kafka.partitioner.default import DefaultPartitioner

from framework.kafka.errors import (
    CLIENT,
    FLUSHING,
    SENDING,
    RecordTooLarge,
    TimestampRefused,
    kafka_python_error,
)
from framework.kafka.kafka_python_keywords import client_keywords
from framework.kafka.producer import DeliveryFailure, Headers, TopicSend

__all__ = ["KafkaPythonProducer", "OnePartitionFirst", "producer_settings", "warm_metadata"]


def producer_settings(properties: Mapping[str, str]) -> dict[str, Any]:
    """`KafkaProducer` keyword arguments for client properties by their standard names."""
    return client_keywords(KafkaProducer, properties)


_LOOK_EVERY: Final = 64
"""Sends between two looks at the oldest kept futures, which let go of those done."""

_KEPT: Final = 4
"""Entries per kept send, one each: its future, topic, key and token.  Not a tuple per send:
that was one more container per record for the cyclic collector, about 13 % more scans of
the young generation and 3-5 % of a kafka-python producer's time (benchmarks/HOT_PATH.md,
round 19).  `extend` of a tuple frees the tuple at once: the collector never counts it."""

_LOOK_MASK: Final = _LOOK_EVERY * _KEPT - 1
"""A look comes when the kept entries reach a multiple of `_LOOK_EVERY * _KEPT` (a power of
two): sends add `_KEPT` at a time, so at most every `_LOOK_EVERY` sends."""

_SETTLE_EVERY: Final = 4096
"""Kept sends at which every kept future is looked at, not only the oldest: a producer that
never flushes (`sessionizer produce` of an endless input) keeps those in flight, not every
one, also while one partition's oldest send waits."""


class KafkaPythonProducer:
    """`KafkaProducer`; each send's future is kept until it is done, and `flush` reports the
    failed ones."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self._settings = dict(settings)
        # future, topic, key, token (`_KEPT` entries) of each send not yet seen done, oldest
        # first.  Kept on the caller's thread: an errback per send took kafka-python's future
        # lock and built a partial for every record, a few percent of the node's loop.  Let go
        # of soon after they are done: futures kept thousands of sends longer than
        # kafka-python keeps them reach the collector's oldest generation and bring on its
        # full collections (benchmarks/HOT_PATH.md, round 16).
        self._pending: deque[Any] = deque()
        self._failed: list[DeliveryFailure] = []
        """Failures seen done since the last flush (by `_settle`)."""
        self._walk_at = _SETTLE_EVERY
        with CLIENT:
            self._producer = KafkaProducer(**settings)

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
        """Queue one record (kafka-python batches it; the I/O thread sends)."""
        try:
            future = self._producer.send(
                topic,
                value=value,
                key=key,
                headers=headers,
                partition=partition,
                timestamp_ms=timestamp_ms,
            )
        except Exception as exc:
            # Refused before it was queued: too large, or no metadata or buffer space
            # within max_block_ms.  (An `except`, not a `with`: no calls per send.)
            failed = SENDING.mapped(exc)
            if failed is None:
                raise
            raise failed from exc
        pending = self._pending
        pending.extend((future, topic, key, token))
        if not len(pending) & _LOOK_MASK:
            self._settle()

    def _settle(self) -> None:
        """Let go of the done sends, oldest first, or of every done one when many are kept; a
        failed one waits in `_failed` for `flush`."""
        pending, failed = self._pending, self._failed
        popleft = pending.popleft
        while pending and pending[0].is_done:
            future, topic, key, token = popleft(), popleft(), popleft(), popleft()
            if future.exception is not None:
                failed.append(_failure(topic, key, token, future.exception))
        if len(pending) >= self._walk_at * _KEPT:
            in_flight: list[Any] = []
            for entry in _kept_sends(pending):
                if not entry[0].is_done:
                    in_flight.extend(entry)
                elif entry[0].exception is not None:
                    failed.append(_failure(entry[1], entry[2], entry[3], entry[0].exception))
            # Walked again only after as many more: a look stays O(1) per send on average.
            pending.clear()
            pending.extend(in_flight)
            self._walk_at = max(_SETTLE_EVERY, 2 * len(in_flight) // _KEPT)

    @property
    def unsettled(self) -> int:
        """Sends kept until they are seen done: those in flight, and the done ones behind the
        oldest in flight (fewer than `_SETTLE_EVERY`, or than twice those in flight)."""
        return len(self._pending) // _KEPT

    def _undelivered(self) -> list[str]:
        """Why each failed send since the last flush (or `_forget_sends`) failed."""
        kept = [f.exception for f, *_ in _kept_sends(self._pending)]
        return [f.detail for f in self._failed] + [repr(e) for e in kept if e is not None]

    def _forget_sends(self) -> None:
        """Drop every send kept (a transaction's end settled them all)."""
        self._pending.clear()
        self._failed = []
        self._walk_at = _SETTLE_EVERY

    def topic_sender(self, topics: Sequence[str]) -> TopicSend:
        """`send` to partition 0 of `topics[index]`, in one frame of the layer per record.

        It does what `send` does, kept with `send`'s sends, but calls kafka-python's `send`
        by position from this frame: a frame and the keyword handling fewer, 1,467 of the
        5,444 instructions a fragment cost `StreamProducer` over bare + encoding on a client
        that does nothing (valgrind; benchmarks/HOT_PATH.md, round 21).
        """
        names, produce = list(topics), self._producer.send
        pending, settle = self._pending, self._settle

        def send_to(index: int, key: bytes | None, value: bytes, timestamp_ms: int) -> None:
            topic = names[index]
            try:
                # kafka-python's order: topic, value, key, headers, partition, timestamp_ms.
                future = produce(topic, value, key, None, 0, timestamp_ms)
            except Exception as exc:
                failed = SENDING.mapped(exc)
                if failed is None:
                    raise
                raise failed from exc
            pending.extend((future, topic, key, None))
            if not len(pending) & _LOOK_MASK:
                settle()

        return send_to

    def take_failures(self) -> list[DeliveryFailure]:
        """The failures among the sends seen done (the oldest first), without waiting."""
        self._settle()
        failed, self._failed = self._failed, []
        return failed

    def flush(self, timeout: float | None) -> list[DeliveryFailure]:
        """Wait for every acknowledgement; return the failures since the last flush."""
        kept, failed = list(_kept_sends(self._pending)), self._failed
        self._forget_sends()
        # Not settled in time: what failed is replayed with everything else unsettled.
        with FLUSHING:
            self._producer.flush(timeout=timeout)
        # After a complete flush every future is done; `exception` is set on the failed ones.
        return failed + [
            _failure(topic, key, token, future.exception)
            for future, topic, key, token in kept
            if future.exception is not None
        ]

    @property
    def api_version(self) -> tuple[int, ...] | None:
        """The brokers' version this producer found (or was told)."""
        version = self._producer.config.get("api_version")
        return tuple(version) if version else None

    def close(self, timeout: float | None = None) -> None:
        """Close the producer (waits up to `timeout` for what is still queued, then drops it)."""
        try:
            self._producer.close(timeout=timeout)
        except KafkaTimeoutError:
            # kafka-python 3.0 raises from `close` when its flush outlives the timeout, before
            # it stops its I/O thread: stop that thread as `close` would have (what is still
            # queued was never acknowledged, so no state commit covers it).
            sender = self._producer._sender  # no public call stops it
            if sender is not None and sender.is_alive():
                sender.force_close()
            self._producer._closed = True

    def topic_names(self, timeout: float) -> list[str]:
        """Every topic, through an admin client on the producer's connection settings.

        kafka-python's producer cannot list topics; the admin client's own request
        timeout bounds the wait instead of `timeout`.
        """
        accepted = KafkaAdminClient.DEFAULT_CONFIG
        connection = {k: v for k, v in self._settings.items() if k in accepted}
        with CLIENT:
            admin = KafkaAdminClient(**connection)
        try:
            with CLIENT:
                return list(admin.list_topics())
        finally:
            admin.close()

    def warm_metadata(self, topics: Sequence[str]) -> None:
        """Learn every topic's partitions in one metadata request, not one blocking send each.

        kafka-python's first `send` to a topic adds it to the tracked topics and waits
        for a metadata round trip, one topic at a time. Adding them all first (through
        the I/O thread's thread-safe queue) makes the first wait fetch them together.
        """
        warm_metadata(self._producer, topics)


def _kept_sends(pending: deque[Any]) -> Iterator[tuple[Any, str, bytes | None, object]]:
    """(future, topic, key, token) of each kept send, oldest first."""
    entries = iter(pending)
    return zip(entries, entries, entries, entries, strict=True)


def _failure(topic: str, key: bytes | None, token: object, exc: BaseException) -> DeliveryFailure:
    """A failed delivery, as the layer reports it (`RecordTooLarge` and `TimestampRefused` mark
    the permanent ones)."""
    mapped = kafka_python_error(exc)
    refused = isinstance(mapped, TimestampRefused)
    too_large = isinstance(mapped, RecordTooLarge)
    return DeliveryFailure(topic, key, str(exc), repr(exc), too_large, token, refused)


def warm_metadata(producer: KafkaProducer, topics: Sequence[str]) -> None:
    """`KafkaPythonProducer.warm_metadata` for a bare `KafkaProducer` (the benchmark's)."""
    sender = producer._sender  # kafka-python has no public bulk call
    for topic in topics:
        sender.add_topic(topic)
    for topic in topics:
        producer.partitions_for(topic)


class OnePartitionFirst(DefaultPartitioner):  # type: ignore[misc]  # kafka-python is untyped
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
