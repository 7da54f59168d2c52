"""Both record sources hand out every record they took from the client, errors beside them.

A Kafka client hands a record out once: one taken from it and then dropped by
the source is never fetched again, and the node's next commit moves past it.
The confluent source runs over a fake librdkafka `Consumer`
(`framework.testing.confluent`); the kafka-python source over kafka-python's
own `Fetcher`, fed fetch responses, so what is checked is the library's real
buffering (it keeps an error met after some records for its next `poll`).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from kafka import TopicPartition
from kafka.consumer.fetcher import CompletedFetch, Fetcher
from kafka.consumer.subscription_state import SubscriptionState
from kafka.errors import OffsetOutOfRangeError
from kafka.record.memory_records import MemoryRecordsBuilder

from framework.kafka import kafka_python_reader as kafka_source
from framework.node.kafka_source import KafkaRecordSource
from framework.testing.confluent import ScriptedConsumer, error, install, message, out_of_range

A, B = "t.stream.0000", "t.stream.0001"


def offsets(fetched: Any) -> dict[str, list[int]]:
    """Per stream, the offsets of the records a poll handed out."""
    return {stream: [r.offset for r in records] for stream, records in fetched.records.items()}


# -- confluent-kafka (librdkafka) ---------------------------------------------------


def test_confluent_records_beside_an_out_of_range_stream_are_handed_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    consumer = ScriptedConsumer([[message(A, 0), message(A, 1), out_of_range(B)], [message(A, 2)]])
    source = install(monkeypatch, consumer)
    source.assign({A: 0, B: 7})
    first = source.poll(0.1, 100)
    assert offsets(first) == {A: [0, 1]}, "records consume() handed out were dropped"
    assert first.outside == {B: 7} and not first.errors and first.error is None
    second = source.poll(0.1, 100)
    assert offsets(second) == {A: [2]} and not second.outside


def test_confluent_records_around_a_stream_error_are_handed_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    batch = [message(A, 0), message(B, 3), error(B), message(A, 1), message(B, 4)]
    source = install(monkeypatch, ScriptedConsumer([batch]))
    source.assign({A: 0, B: 3})
    fetched = source.poll(0.1, 100)
    assert offsets(fetched) == {A: [0, 1], B: [3, 4]}
    assert list(fetched.errors) == [B] and "UNKNOWN_TOPIC_OR_PART" in fetched.errors[B]
    assert not fetched.outside and fetched.error is None


def test_confluent_an_error_of_no_stream_keeps_the_records(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    batch = [message(A, 0), error(None, KafkaError._TRANSPORT), message(A, 1)]
    source = install(monkeypatch, ScriptedConsumer([batch]))
    source.assign({A: 0})
    fetched = source.poll(0.1, 100)
    assert offsets(fetched) == {A: [0, 1]}
    assert fetched.error is not None and "_TRANSPORT" in fetched.error


def test_confluent_a_failed_consume_is_reported_not_raised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Broken(ScriptedConsumer):
        def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
            raise KafkaException(KafkaError(KafkaError._ALL_BROKERS_DOWN))

    source = install(monkeypatch, Broken([]))
    source.assign({A: 0})
    fetched = source.poll(0.1, 100)
    assert not fetched.records and fetched.error is not None
    assert "_ALL_BROKERS_DOWN" in fetched.error


def test_confluent_the_out_of_range_position_is_the_one_after_the_records_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    batches = [[message(B, 7), message(B, 8)], [message(A, 0), out_of_range(B)]]
    source = install(monkeypatch, ScriptedConsumer(batches))
    source.assign({A: 0, B: 7})
    assert offsets(source.poll(0.1, 100)) == {B: [7, 8]}
    fetched = source.poll(0.1, 100)
    assert fetched.outside == {B: 9} and offsets(fetched) == {A: [0]}


# -- kafka-python -------------------------------------------------------------------


class FetcherConsumer:
    """A `KafkaConsumer` reduced to kafka-python's real fetch buffer.

    `poll` drains `Fetcher.fetched_records`, as `KafkaConsumer.poll` does once its
    fetch responses are in; the test queues those responses with `respond`.
    """

    def __init__(self) -> None:
        self.subscriptions = SubscriptionState("none")  # auto_offset_reset="none"
        network = SimpleNamespace(_manager=SimpleNamespace(_net=None, broker_version=None))
        self.fetcher = Fetcher(network, self.subscriptions)

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.subscriptions.assign_from_user(partitions)

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self.subscriptions.seek(partition, offset)

    def respond(self, topic: str, offset: int, count: int = 0, code: int = 0) -> None:
        """A fetch response for `topic` from `offset`: `count` records, or error `code`."""
        builder = MemoryRecordsBuilder(
            magic=2, compression_type=0, batch_size=1 << 20, offset=offset
        )
        for _ in range(count):
            builder.append(timestamp=1000, key=b"k", value=b"v", headers=[])
        builder.close()
        data = SimpleNamespace(
            error_code=code, high_watermark=offset + count, records=builder.buffer(),
            aborted_transactions=None, preferred_read_replica=-1, diverging_epoch=None,
        )  # fmt: skip
        partition = TopicPartition(topic, 0)
        self.fetcher._completed_fetches.append(CompletedFetch(partition, offset, 11, data, None))

    def poll(self, timeout_ms: int = 0, max_records: int = 500) -> dict[Any, list[Any]]:
        return dict(self.fetcher.fetched_records(max_records)[0])

    def close(self) -> None:
        """Nothing to release."""


@pytest.fixture
def fetcher(monkeypatch: pytest.MonkeyPatch) -> FetcherConsumer:
    consumer = FetcherConsumer()
    monkeypatch.setattr(kafka_source, "assigned_consumer", lambda *args, **kwargs: consumer)
    return consumer


def test_kafka_python_records_before_an_out_of_range_stream_are_handed_out(
    fetcher: FetcherConsumer,
) -> None:
    source = KafkaRecordSource("fake-kafka:1", client_id="n1")
    source.assign({A: 0, B: 7})
    fetcher.respond(A, 0, count=2)
    fetcher.respond(B, 7, code=OffsetOutOfRangeError.errno)
    polls = [source.poll(0.1, 100) for _ in range(2)]  # the library keeps the error for later
    fetcher.respond(A, 2, count=1)
    polls.append(source.poll(0.1, 100))
    assert [offsets(p) for p in polls] == [{A: [0, 1]}, {}, {A: [2]}]
    assert [p.outside for p in polls] == [{}, {B: 7}, {}]


def test_kafka_python_records_after_an_out_of_range_stream_are_handed_out(
    fetcher: FetcherConsumer,
) -> None:
    source = KafkaRecordSource("fake-kafka:1", client_id="n1")
    source.assign({A: 0, B: 7})
    fetcher.respond(B, 7, code=OffsetOutOfRangeError.errno)
    fetcher.respond(A, 0, count=3)
    first, second = source.poll(0.1, 100), source.poll(0.1, 100)
    assert (first.outside, offsets(first)) == ({B: 7}, {})
    assert (second.outside, offsets(second)) == ({}, {A: [0, 1, 2]})


def test_kafka_python_a_fetch_error_is_reported_not_raised(fetcher: FetcherConsumer) -> None:
    source = KafkaRecordSource("fake-kafka:1", client_id="n1")
    source.assign({A: 0})
    fetcher.respond(A, 0, code=29)  # TOPIC_AUTHORIZATION_FAILED: raised by the fetcher
    fetched = source.poll(0.1, 100)
    assert not fetched.records and fetched.error is not None
    assert "TopicAuthorizationFailedError" in fetched.error
