"""In-process fakes of confluent-kafka's `Consumer`, to drive the real `ConfluentRecordSource`.

- `ScriptedConsumer`: `consume()` returns the given message lists, one per call;
- `LogConsumer`: librdkafka over in-memory streams: fetches into a queue that
  `consume()` hands out and `assign()` purges; `fail`, `lose` and `truncate`
  make a stream's next fetch return an error, lose records silently, or fall
  outside the log (as retention deleting records past the reader's position does).

Install one with `install(monkeypatch, consumer)`: `ConfluentRecordSource` then
builds it instead of a real `Consumer`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaError, TopicPartition

from framework.kafka import confluent_reader
from framework.node.confluent_source import ConfluentRecordSource

__all__ = [
    "FakeMessage",
    "LogConsumer",
    "ScriptedConsumer",
    "error",
    "install",
    "message",
    "out_of_range",
]


class FakeMessage:
    """The accessors of `confluent_kafka.Message` the source calls."""

    def __init__(
        self,
        topic: str | None,
        offset: int | None,
        key: bytes | None = None,
        value: bytes | None = None,
        timestamp: int = 0,
        headers: list[tuple[str, bytes]] | None = None,
        fault: KafkaError | None = None,
    ) -> None:
        self._topic, self._offset, self._key, self._value = topic, offset, key, value
        self._timestamp, self._headers, self._fault = timestamp, headers, fault

    def error(self) -> KafkaError | None:
        return self._fault

    def topic(self) -> str | None:
        return self._topic

    def offset(self) -> int | None:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def timestamp(self) -> tuple[int, int]:
        return (1, self._timestamp)  # TIMESTAMP_CREATE_TIME

    def headers(self) -> list[tuple[str, bytes]] | None:
        return self._headers


def message(topic: str, offset: int, value: bytes = b"v") -> FakeMessage:
    """A record message."""
    return FakeMessage(topic, offset, b"k", value, 1000 + offset, [])


def error(topic: str | None, code: int = KafkaError.UNKNOWN_TOPIC_OR_PART) -> FakeMessage:
    """An error message for `topic` (None: not tied to one), as librdkafka hands it out."""
    return FakeMessage(topic, None, fault=KafkaError(code, f"fake error {code}"))


def out_of_range(topic: str) -> FakeMessage:
    """What librdkafka hands out with `auto.offset.reset=error` for a position outside the log."""
    return error(topic, KafkaError._AUTO_OFFSET_RESET)


class _Base:
    """What the source calls besides `consume`."""

    def __init__(self) -> None:
        self.assigned: list[dict[str, int]] = []
        self.closed = False

    def list_topics(self, timeout: float = -1) -> None:
        """The source asks once at start, to fail fast on a wrong address."""

    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        self.assigned.append({tp.topic: tp.offset for tp in partitions})

    def close(self) -> None:
        self.closed = True


class ScriptedConsumer(_Base):
    """`consume()` returns the next scripted list of messages, then nothing."""

    def __init__(self, batches: Iterable[Sequence[FakeMessage]]) -> None:
        super().__init__()
        self.batches = deque(batches)

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[FakeMessage]:
        return list(self.batches.popleft()) if self.batches else []


class LogConsumer(_Base):
    """librdkafka over in-memory streams: per-stream fetches into one queue, purged on assign.

    Each fetch round takes up to `per_fetch` records of every assigned stream, in
    stream order, so one `consume()` mixes streams as a real one does.  A stream
    whose position is outside its log yields one `_AUTO_OFFSET_RESET` error and
    is not fetched again until re-assigned (librdkafka's `auto.offset.reset=error`).
    """

    def __init__(self, streams: Mapping[str, Sequence[Any]], per_fetch: int = 5) -> None:
        super().__init__()
        self.streams = {name: list(records) for name, records in streams.items()}
        self.per_fetch = per_fetch
        self.start: dict[str, int] = dict.fromkeys(self.streams, 0)
        self.positions: dict[str, int] = {}
        self.stopped: set[str] = set()
        self.queue: deque[FakeMessage] = deque()
        self.faults: dict[str, tuple[int | None, int]] = {}  # stream -> (error, records skipped)
        self.consumed = 0

    def fail(
        self, stream: str, code: int = KafkaError.UNKNOWN_TOPIC_OR_PART, skip: int = 0
    ) -> None:
        """The stream's next fetch hands out an error and moves its position `skip` on."""
        self.faults[stream] = (code, skip)

    def lose(self, stream: str, count: int) -> None:
        """The stream's next fetch skips `count` records and says nothing (a client bug)."""
        self.faults[stream] = (None, count)

    def end(self, stream: str) -> int:
        """The stream's log end offset."""
        records = self.streams[stream]
        return records[-1].offset + 1 if records else 0

    def truncate(self, stream: str, start: int) -> None:
        """Delete the stream's records before `start` (retention, `delete_records`)."""
        self.start[stream] = start

    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        super().assign(partitions)
        self.positions = {tp.topic: tp.offset for tp in partitions}
        self.stopped.clear()
        self.queue.clear()

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[FakeMessage]:
        self.consumed += 1
        if len(self.queue) < num_messages:
            self._fetch()
        count = min(num_messages, len(self.queue))
        return [self.queue.popleft() for _ in range(count)]

    def _fetch(self) -> None:
        for stream in sorted(self.positions):
            if stream in self.stopped:
                continue
            position = self.positions[stream]
            if stream in self.faults:
                code, skip = self.faults.pop(stream)
                position = self.positions[stream] = position + skip
                if code is not None:
                    self.queue.append(error(stream, code))
                    continue
            if not self.start[stream] <= position <= self.end(stream):
                self.queue.append(out_of_range(stream))
                self.stopped.add(stream)
                continue
            fetched = [r for r in self.streams[stream] if r.offset >= position][: self.per_fetch]
            for record in fetched:
                self.queue.append(
                    FakeMessage(
                        stream, record.offset, record.key, record.value, record.timestamp,
                        list(record.headers or ()) or None,
                    )
                )  # fmt: skip
                self.positions[stream] = record.offset + 1

    def caught_up(self, *, but: Iterable[str] = ()) -> bool:
        """Every assigned stream (`but` these) fetched and handed out to its end."""
        left = {s: p for s, p in self.positions.items() if s not in set(but)}
        return bool(left) and all(p >= self.end(s) for s, p in left.items()) and not self.queue

    def offsets_for_times(
        self, partitions: Sequence[TopicPartition], timeout: float = -1
    ) -> list[TopicPartition]:
        """ListOffsets: each stream's log start or end."""
        answered = []
        for tp in partitions:
            at = self.start[tp.topic] if tp.offset == OFFSET_BEGINNING else None
            if tp.offset == OFFSET_END:
                at = self.end(tp.topic)
            answered.append(TopicPartition(tp.topic, 0, at if at is not None else -1))
        return answered

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float = -1, cached: bool = False
    ) -> tuple[int, int]:
        return self.start[partition.topic], self.end(partition.topic)


def install(monkeypatch: pytest.MonkeyPatch, consumer: _Base) -> ConfluentRecordSource:
    """A real `ConfluentRecordSource` over `consumer` instead of librdkafka."""
    monkeypatch.setattr(confluent_reader, "Consumer", lambda config: consumer)
    return ConfluentRecordSource("fake-kafka:1", client_id="n1")
