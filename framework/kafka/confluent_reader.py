"""`ConfluentReader`: the assigned reader (`framework.kafka.reader`) over confluent-kafka.

Same contract as `KafkaPythonReader`: manual assignment, no group membership,
no commits, and `auto.offset.reset=error`, so a position outside the log is
reported (`ReaderFetch.outside`) instead of being moved silently.

`Consumer.consume()` hands out a list of messages in which records of some
streams and errors of others arrive together. librdkafka never hands a message
out twice, so every record in that list goes to the node, and the errors are
reported beside them (`ReaderFetch`): raising on an error would drop the records
around it, and the next commit would move past them.

A client whose brokers were all down may never find one again: a broker in
controlled shutdown answers metadata without itself in the broker list, and
librdkafka then forgets it. With one broker that leaves the client none, and it
never re-bootstraps (KIP-899/1102): its trigger timer starts only when a metadata
request is sent, and with no broker none is (librdkafka issue #5301, 2.16). It
does not always say so either: a broker forgotten that way is a planned
disconnection, which raises no `_ALL_BROKERS_DOWN`. So a reader that fetches
nothing asks its client for one stream's metadata, every few seconds after
librdkafka reported every broker down and every `_IDLE_CHECK_S` otherwise; if
that client cannot answer while a new one can, the new one replaces it, assigned
at each stream's position.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    TopicPartition,
)

from framework.kafka.closing import close_aside
from framework.kafka.errors import CONFLUENT, ClientError
from framework.kafka.reader import ReaderFetch
from framework.kernel.kafka_settings import librdkafka_logger
from framework.kernel.records import StreamRecord

__all__ = ["ConfluentReader"]

_BOUNDS_TIMEOUT_S = 10.0
# After every broker was down: how often an idle reader checks its client has a broker
# again, and how long each of the two metadata requests of that check may wait.
_BROKER_CHECK_S = 5.0
_PROBE_TIMEOUT_S = 1.0
# How long a reader fetches nothing before it checks its client still knows a broker
# (one metadata request; a node stranded so read nothing until the check found it).
_IDLE_CHECK_S = 10.0
_PREFETCH_KIB = 16 * 1024
_PREFETCH_BACKOFF_MS = 100
_OUT_OF_RANGE = (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE)


class ConfluentReader:
    """Reads single-partition streams from chosen offsets."""

    def __init__(
        self,
        bootstrap: str,
        *,
        client_id: str,
        properties: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._bootstrap = bootstrap
        self._client_id = client_id
        self._settings: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "logger": librdkafka_logger(),  # its lines as log records, not stderr text
            # librdkafka wants a group id; nothing is ever committed or joined with it.
            "group.id": f"{client_id}-unused",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "error",
            "enable.partition.eof": False,
            # librdkafka's default prefetch is 64 MiB, and a fetch response stays allocated
            # until its last record is consumed: a node behind its streams held 800 MB and
            # touched a fresh page for every few records fetched (HOT_PATH.md, round 15).
            # 16 MiB is more than a second of a node's records; librdkafka sizes its
            # fetches (`fetch.max.bytes`) from it.
            "queued.max.messages.kbytes": _PREFETCH_KIB,
            # A partition over that bound is not fetched again for this long (default 1 s):
            # with the smaller bound the loop ran dry for up to 0.4 s, a few times in
            # every 10 s, waiting for fetches that were postponed.
            "fetch.queue.backoff.ms": _PREFETCH_BACKOFF_MS,
            # The user's properties last: theirs win (the reserved ones cannot be set).
            **(properties or {}),
            "error_cb": self._client_error,
        }
        self._positions: dict[str, int] = {}
        self._clock = clock
        self._brokers_lost = False  # librdkafka said every broker is down; none seen since
        self._next_check = clock() + _IDLE_CHECK_S  # the next stranded-client check
        # librdkafka connects lazily and retries for ever: ask once, so a wrong address
        # fails the node at start with one clear line instead of a silent retry loop.
        self._consumer = self._open(_BOUNDS_TIMEOUT_S)

    def _open(self, timeout: float) -> Any:
        """A consumer that answered a metadata request within `timeout`; raises `ClientError`."""
        consumer = Consumer(self._settings)
        try:
            with CONFLUENT:
                consumer.list_topics(timeout=timeout)
        except ClientError as exc:
            close_aside(consumer.close, "stranded-consumer")  # it may know no broker
            raise ClientError(f"cannot reach Kafka at {self._bootstrap} ({exc.__cause__})") from exc
        return consumer

    def _client_error(self, error: KafkaError) -> None:
        """librdkafka's error callback, served by `consume` on the caller's thread."""
        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            self._brokers_lost = True
            self._next_check = self._clock()  # at the next poll that fetches nothing
        # With a callback set librdkafka no longer logs these itself: logged as its lines are.
        librdkafka_logger().warning("%s [%s] %s", "ERROR", self._client_id, error.str())

    def _reopen_if_stranded(self) -> str | None:
        """A reader fetching nothing: a new client if this one knows no broker and a new one
        reaches Kafka (what happened, to report); None while this one answers or none can."""
        now = self._clock()
        if now < self._next_check or not self._positions:
            return None
        self._next_check = now + (_BROKER_CHECK_S if self._brokers_lost else _IDLE_CHECK_S)
        try:
            with CONFLUENT:
                self._consumer.list_topics(next(iter(self._positions)), timeout=_PROBE_TIMEOUT_S)
        except ClientError:
            pass  # no broker answers this client: does Kafka answer a new one?
        else:
            self._brokers_lost = False
            self._next_check = now + _IDLE_CHECK_S
            return None
        try:
            fresh = self._open(_PROBE_TIMEOUT_S)
        except ClientError:
            return None  # Kafka is still away: keep the client, ask again later
        close_aside(self._consumer.close, "stranded-consumer")
        self._consumer = fresh
        fresh.assign([TopicPartition(s, 0, offset) for s, offset in self._positions.items()])
        self._brokers_lost = False
        return (
            "the Kafka client knew no usable broker while a new client reaches Kafka: "
            "reading on through the new one from each stream's position"
        )

    def assign(self, positions: Mapping[str, int]) -> None:
        """Read exactly these streams, each from the given offset."""
        self._positions = dict(positions)
        self._consumer.assign([TopicPartition(s, 0, offset) for s, offset in positions.items()])

    def poll(self, timeout: float, max_records: int) -> ReaderFetch:
        """Every record `consume()` handed out, per stream; its errors reported beside them."""
        try:
            with CONFLUENT:
                messages = self._consumer.consume(num_messages=max_records, timeout=timeout)
        except ClientError as exc:  # raised before any message was handed out
            return ReaderFetch(error=f"reading the streams failed ({exc.__cause__!r}); retrying")
        batches: dict[str, list[StreamRecord]] = {}
        outside: list[str] = []
        errors: dict[str, str] = {}
        general: str | None = None
        if not messages:
            general = self._reopen_if_stranded()
        batch: list[StreamRecord] = []
        batch_topic = None
        for message in messages:
            error = message.error()
            topic = message.topic() or ""
            if error is not None:
                if topic and error.code() in _OUT_OF_RANGE:
                    outside.append(topic)
                elif topic:
                    errors[topic] = f"reading {topic} failed ({error})"
                else:
                    general = f"reading the streams failed ({error})"
                continue  # and on: the records around it were handed out all the same
            if topic != batch_topic:  # runs of one topic: one dict lookup per run, not per record
                batch_topic = topic
                batch = batches.setdefault(topic, [])
            offset = message.offset() or 0  # None only on error messages, handled above
            batch.append(
                StreamRecord(
                    topic,
                    offset,
                    message.key(),
                    message.value(),
                    message.timestamp()[1],
                    cast("list[tuple[str, bytes]] | None", message.headers()),
                )
            )
        for topic, records in batches.items():
            self._positions[topic] = records[-1].offset + 1
        if batches:
            self._brokers_lost = False  # a broker serves this client
            self._next_check = self._clock() + _IDLE_CHECK_S
        positions = {topic: self._positions.get(topic, -1) for topic in outside}
        return ReaderFetch(batches, positions, errors, general)

    def bounds(self, streams: Sequence[str]) -> Mapping[str, tuple[int, int]]:
        """Each stream's (log start, log end) offsets, in two requests for all the streams.

        One watermark query per stream would wait behind the fetch's long poll each
        time (`fetch.wait.max.ms`): half a second a stream, 30 s for 64 streams.
        """
        starts = self._offsets_at(streams, OFFSET_BEGINNING)
        ends = self._offsets_at(streams, OFFSET_END)
        return {stream: (starts[stream], ends[stream]) for stream in streams}

    def _offsets_at(self, streams: Sequence[str], which: int) -> dict[str, int]:
        """ListOffsets for every stream at once (`which`: OFFSET_BEGINNING or OFFSET_END)."""
        asked = [TopicPartition(stream, 0, which) for stream in streams]
        try:
            with CONFLUENT:
                answered = self._consumer.offsets_for_times(asked, timeout=_BOUNDS_TIMEOUT_S)
        except ClientError as exc:
            raise ClientError(
                f"cannot read the bounds of {len(streams)} streams ({exc.__cause__!r})"
            ) from exc
        failed = [f"{tp.topic}: {tp.error}" for tp in answered if tp.error or tp.offset < 0]
        if failed:
            raise ClientError(f"cannot read the bounds of {len(failed)} streams: {failed[:3]}")
        return {tp.topic: int(tp.offset) for tp in answered}

    def ends(self, streams: Sequence[str]) -> Mapping[str, int]:
        """Each stream's end as librdkafka last saw it in a fetch response (no request)."""
        ends = {}
        for stream in streams:
            try:
                with CONFLUENT:
                    _, high = self._consumer.get_watermark_offsets(
                        TopicPartition(stream, 0), cached=True
                    )
            except ClientError:
                continue  # not assigned: nothing seen
            if high >= 0:
                ends[stream] = int(high)
        return ends

    def close(self) -> None:
        """Close the consumer (it never joined a group, so there is nothing to leave)."""
        self._consumer.close()
