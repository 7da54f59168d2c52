"""A confluent reader left with no broker after every one was down reads on through a new client.

A broker in controlled shutdown answers metadata without itself in the broker
list; librdkafka then forgets it, and with one broker the node's consumer knew
none once the broker was back: it fetched nothing for minutes
(`test_sink_and_shutdown_faults.py` timed out waiting for recovery in 4 of 18 runs
on a loaded machine). These fakes of librdkafka's `Consumer` play that client.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from framework.kafka import confluent_reader
from framework.kafka.confluent_reader import ConfluentReader
from framework.kernel.kafka_settings import LIBRDKAFKA_LOGGER
from framework.testing.confluent import FakeMessage, message
from framework.testing.members import wait_for

A, B = "t.stream.0000", "t.stream.0001"


class Kafka:
    """Whether a new client reaches the cluster, and every client made."""

    def __init__(self) -> None:
        self.up = True
        self.clients: list[StrandableConsumer] = []

    def consumer(self, settings: dict[str, Any]) -> StrandableConsumer:
        client = StrandableConsumer(self, settings["error_cb"])
        self.clients.append(client)
        return client


class StrandableConsumer:
    """librdkafka's Consumer: answers metadata while it knows a broker and Kafka is up."""

    def __init__(self, kafka: Kafka, error_cb: Callable[[KafkaError], None]) -> None:
        self.kafka, self.error_cb = kafka, error_cb
        self.stranded = False  # every broker it knew was forgotten
        self.batches: list[list[FakeMessage]] = []
        self.assigned: list[dict[str, int]] = []
        self.closed = False
        self.metadata_requests = 0

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> None:
        self.metadata_requests += 1
        if self.stranded or not self.kafka.up:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "no usable brokers"))

    def assign(self, partitions: list[TopicPartition]) -> None:
        self.assigned.append({tp.topic: tp.offset for tp in partitions})

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[FakeMessage]:
        return self.batches.pop(0) if self.batches else []

    def all_brokers_down(self, *, forgotten: bool) -> None:
        """librdkafka's error callback, as `consume` serves it; `forgotten`: none known after."""
        self.error_cb(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
        self.stranded = forgotten

    def close(self) -> None:
        self.closed = True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def kafka(monkeypatch: pytest.MonkeyPatch) -> Kafka:
    kafka = Kafka()
    monkeypatch.setattr(confluent_reader, "Consumer", kafka.consumer)
    return kafka


def reading(kafka: Kafka, clock: Clock) -> tuple[ConfluentReader, StrandableConsumer]:
    """A reader at A:0 and B:5 that has handed out A's records 0 to 2."""
    reader = ConfluentReader("k:9092", client_id="n1", clock=clock)
    first = kafka.clients[0]
    reader.assign({A: 0, B: 5})
    first.batches.append([message(A, 0), message(A, 1), message(A, 2)])
    assert [r.offset for r in reader.poll(0.1, 100).records[A]] == [0, 1, 2]
    return reader, first


def test_a_stranded_client_is_replaced_at_each_streams_position(kafka: Kafka) -> None:
    reader, first = reading(kafka, Clock())
    first.all_brokers_down(forgotten=True)  # the broker is back, but this client knows none

    fetched = reader.poll(0.1, 100)

    assert len(kafka.clients) == 2 and kafka.clients[1].assigned == [{A: 3, B: 5}]
    wait_for(lambda: first.closed, 10, "the stranded client closed (on a thread of its own)")
    assert fetched.error is not None and "new client" in fetched.error
    kafka.clients[1].batches.append([message(A, 3)])
    assert [r.offset for r in reader.poll(0.1, 100).records[A]] == [3]


def test_while_kafka_is_away_the_client_is_kept_and_asked_again_every_few_seconds(
    kafka: Kafka,
) -> None:
    clock = Clock()
    reader, first = reading(kafka, clock)
    kafka.up = False
    first.all_brokers_down(forgotten=True)

    assert reader.poll(0.1, 100).error is None  # a new client fails too: nothing to report
    assert len(kafka.clients) == 2 and not first.closed
    wait_for(lambda: kafka.clients[1].closed, 10, "the new client that failed closed")
    clock.now += 1.0
    reader.poll(0.1, 100)
    assert len(kafka.clients) == 2, "asked again before the check interval"

    kafka.up = True
    clock.now += 5.0
    assert reader.poll(0.1, 100).error is not None
    assert len(kafka.clients) == 3 and kafka.clients[2].assigned == [{A: 3, B: 5}]
    wait_for(lambda: first.closed, 10, "the stranded client closed")


def test_a_client_that_found_its_broker_again_is_kept(kafka: Kafka) -> None:
    clock = Clock()
    reader, first = reading(kafka, clock)
    first.all_brokers_down(forgotten=False)  # the usual restart: librdkafka reconnects

    assert reader.poll(0.1, 100).error is None
    assert len(kafka.clients) == 1 and not first.closed
    requests = first.metadata_requests
    clock.now += 9.0
    reader.poll(0.1, 100)
    assert first.metadata_requests == requests, "asked again before the idle check was due"
    clock.now += 1.0
    assert reader.poll(0.1, 100).error is None
    assert first.metadata_requests == requests + 1 and len(kafka.clients) == 1


def test_records_arriving_mean_a_broker_serves_the_client(kafka: Kafka) -> None:
    clock = Clock()
    reader, first = reading(kafka, clock)
    first.all_brokers_down(forgotten=False)
    first.batches.append([message(A, 3)])
    requests = first.metadata_requests

    reader.poll(0.1, 100)
    clock.now += 9.0
    reader.poll(0.1, 100)

    assert first.metadata_requests == requests and len(kafka.clients) == 1


def test_a_client_stranded_without_a_word_is_replaced_once_it_idles(kafka: Kafka) -> None:
    """A broker forgotten from a metadata answer is a planned disconnection to librdkafka:
    no `_ALL_BROKERS_DOWN`, and no re-bootstrap (a node fetched nothing for 3 minutes)."""
    clock = Clock()
    reader, first = reading(kafka, clock)
    first.stranded = True

    assert reader.poll(0.1, 100).error is None  # fetching nothing for a moment is no sign
    assert len(kafka.clients) == 1
    clock.now += 10.0
    fetched = reader.poll(0.1, 100)

    assert fetched.error is not None and "new client" in fetched.error
    assert len(kafka.clients) == 2 and kafka.clients[1].assigned == [{A: 3, B: 5}]
    wait_for(lambda: first.closed, 10, "the stranded client closed (on a thread of its own)")


def test_a_reader_without_streams_asks_nothing(kafka: Kafka) -> None:
    clock = Clock()
    reader = ConfluentReader("k:9092", client_id="n1", clock=clock)
    first = kafka.clients[0]
    requests = first.metadata_requests
    clock.now += 60.0
    reader.poll(0.1, 100)
    assert first.metadata_requests == requests


def test_the_clients_errors_are_logged_as_its_lines_are(
    kafka: Kafka, caplog: pytest.LogCaptureFixture
) -> None:
    _, first = reading(kafka, Clock())
    with caplog.at_level("WARNING", logger=LIBRDKAFKA_LOGGER):
        first.all_brokers_down(forgotten=False)
    assert [r.args for r in caplog.records] == [("ERROR", "n1", "1/1 brokers are down")]
