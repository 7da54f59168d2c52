"""`ConfluentRecordSource`: the node's `RecordSource` over confluent-kafka (librdkafka).

Same contract as `KafkaRecordSource`: manual assignment, no group membership,
no commits, and `auto.offset.reset=error`, so a position outside the log is
reported as `PositionOutOfRange` instead of being moved silently.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from framework.node.errors import NodeError, PositionOutOfRange
from framework.node.ports import SourceRecord

__all__ = ["ConfluentRecordSource"]

_BOUNDS_TIMEOUT_S = 10.0
_OUT_OF_RANGE = (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE)


@dataclass(frozen=True, slots=True)
class _Record:
    topic: str
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: list[tuple[str, bytes]] | None


class ConfluentRecordSource:
    """Reads single-partition streams from chosen offsets."""

    def __init__(
        self, bootstrap: str, *, client_id: str, properties: Mapping[str, str] | None = None
    ) -> None:
        self._consumer = Consumer(
            {
                **(properties or {}),
                "bootstrap.servers": bootstrap,
                "client.id": client_id,
                # librdkafka wants a group id; nothing is ever committed or joined with it.
                "group.id": f"{client_id}-unused",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "error",
                "enable.partition.eof": False,
            }
        )
        self._positions: dict[str, int] = {}
        try:
            # librdkafka connects lazily and retries for ever: ask once, so a wrong address
            # fails the node at start with one clear line instead of a silent retry loop.
            self._consumer.list_topics(timeout=_BOUNDS_TIMEOUT_S)
        except KafkaException as exc:
            self._consumer.close()
            raise NodeError(f"cannot reach Kafka at {bootstrap} ({exc})") from exc

    def assign(self, positions: Mapping[str, int]) -> None:
        """Read exactly these streams, each from the given offset."""
        self._positions = dict(positions)
        self._consumer.assign([TopicPartition(s, 0, offset) for s, offset in positions.items()])

    def poll(self, timeout: float, max_records: int) -> Mapping[str, Sequence[SourceRecord]]:
        """The next records per stream; `PositionOutOfRange` names streams outside their log."""
        try:
            messages = self._consumer.consume(num_messages=max_records, timeout=timeout)
        except KafkaException as exc:
            raise NodeError(f"reading the streams failed ({exc!r}); retrying") from exc
        batches: dict[str, list[SourceRecord]] = {}
        outside: dict[str, int] = {}
        for message in messages:
            error = message.error()
            topic = message.topic() or ""
            if error is not None:
                if error.code() in _OUT_OF_RANGE and topic in self._positions:
                    outside[topic] = self._positions[topic]
                    continue
                raise NodeError(f"reading {topic or 'the streams'} failed ({error}); retrying")
            batches.setdefault(topic, []).append(
                _Record(
                    topic,
                    message.offset() or 0,  # None only on error messages, handled above
                    message.key(),
                    message.value(),
                    message.timestamp()[1],
                    cast("list[tuple[str, bytes]] | None", message.headers()),
                )
            )
        if outside:
            raise PositionOutOfRange(outside)
        for topic, records in batches.items():
            self._positions[topic] = records[-1].offset + 1
        return batches

    def bounds(self, streams: Sequence[str]) -> Mapping[str, tuple[int, int]]:
        """Each stream's (log start, log end) offsets."""
        bounds = {}
        try:
            for stream in streams:
                low, high = self._consumer.get_watermark_offsets(
                    TopicPartition(stream, 0), timeout=_BOUNDS_TIMEOUT_S, cached=False
                )
                bounds[stream] = (int(low), int(high))
        except KafkaException as exc:
            raise NodeError(f"cannot read the bounds of {len(streams)} streams ({exc!r})") from exc
        return bounds

    def close(self) -> None:
        """Close the consumer (it never joined a group, so there is nothing to leave)."""
        self._consumer.close()
