"""A sink whose producer could not deliver gets a fresh one (kafka-python's stays stuck on a
topic deleted and created again); when none can be made, it keeps the one it has."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from framework.kafka.errors import ClientError, FlushIncomplete, SendFailed
from framework.kafka.producer import DeliveryFailure
from framework.testing.members import wait_for
from sessionizer.errors import SinkError
from sessionizer.kafka_sink import KafkaSink
from sessionizer.records import FinishedSession


class Producer:
    """A `RecordProducer` whose sends and flushes fail while `broken`."""

    def __init__(self, name: str, *, broken: bool = False) -> None:
        self.name, self.broken = name, broken
        self.sent: list[tuple[str, bytes | None]] = []
        self.closed_with: list[float | None] = []

    def send(self, topic: str, key: bytes | None, value: bytes | None, **_: Any) -> None:
        if self.broken and topic.endswith("deadletter"):
            raise SendFailed("no metadata for the topic in time")
        self.sent.append((topic, key))

    def flush(self, timeout: float | None) -> list[DeliveryFailure]:
        if self.broken:
            raise FlushIncomplete("Timeout waiting for future", left=len(self.sent))
        return []

    def close(self, timeout: float | None = None) -> None:
        self.closed_with.append(timeout)

    def topic_names(self, timeout: float) -> list[str]:
        return []

    def warm_metadata(self, topics: Sequence[str]) -> None:
        """Nothing to warm."""


def _session(n: int) -> FinishedSession:
    return FinishedSession(
        f"s{n}", f"k{n}", "app.stream.0000", n, n, 1000 * n, 1000 * n, 1, {"pages": 1}
    )


def _sink(first: Producer, fresh: list[Producer | Exception]) -> KafkaSink:
    def reopen() -> Producer:
        made = fresh.pop(0)
        if isinstance(made, Exception):
            raise made
        return made

    return KafkaSink(first, "app.sessions", "app.deadletter", delivery_timeout=1, reopen=reopen)


def test_a_failed_flush_puts_a_fresh_producer_in_place_and_closes_the_old_one_aside() -> None:
    stuck, fresh = Producer("stuck", broken=True), Producer("fresh")
    sink = _sink(stuck, [fresh])
    sink.emit(_session(1))
    with pytest.raises(SinkError, match="not acknowledged"):
        sink.flush()
    wait_for(lambda: stuck.closed_with == [0], 10, "the stuck producer closed (aside)")
    sink.emit(_session(2))  # the node replays: through the fresh producer
    sink.flush()
    assert [key for _, key in fresh.sent] == [b"s2"]


def test_a_failed_send_replaces_the_producer_too() -> None:
    stuck, fresh = Producer("stuck", broken=True), Producer("fresh")
    sink = _sink(stuck, [fresh])
    with pytest.raises(SinkError, match=r"cannot send to app\.deadletter"):
        sink.dead_letter(_dead_letter())
    wait_for(lambda: stuck.closed_with == [0], 10, "the stuck producer closed (aside)")
    sink.emit(_session(3))
    sink.flush()
    assert [key for _, key in fresh.sent] == [b"s3"]


def test_with_kafka_away_the_producer_is_kept_and_the_next_failure_tries_again() -> None:
    stuck, fresh = Producer("stuck", broken=True), Producer("fresh")
    sink = _sink(stuck, [ClientError("cannot reach Kafka at 127.0.0.1:1"), fresh])
    sink.emit(_session(1))
    with pytest.raises(SinkError):
        sink.flush()
    assert stuck.closed_with == [], "no fresh producer: the old one must be kept"
    sink.emit(_session(2))
    with pytest.raises(SinkError):
        sink.flush()  # kept, still failing: now a fresh one can be made
    wait_for(lambda: stuck.closed_with == [0], 10, "the stuck producer closed (aside)")
    sink.emit(_session(3))
    sink.flush()
    assert [key for _, key in fresh.sent] == [b"s3"]


def test_a_sink_without_reopen_keeps_its_producer() -> None:
    stuck = Producer("transactional", broken=True)
    sink = KafkaSink(stuck, "app.sessions", "app.deadletter", delivery_timeout=1)
    sink.emit(_session(1))
    with pytest.raises(SinkError):
        sink.flush()
    assert stuck.closed_with == []


def _dead_letter() -> Any:
    from sessionizer.sinks import DeadLetter

    return DeadLetter("app.stream.0000", 7, "not-msgpack", "bad bytes", b"k", b"\xc1")
