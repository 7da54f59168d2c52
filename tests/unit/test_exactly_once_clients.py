"""Exactly-once settings and the client layer's mapping of transactional errors."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from kafka.errors import KafkaTimeoutError, NotCoordinatorError, ProducerFencedError

from framework.kafka.transactional import ProducerFenced, TransactionAborted, TransactionRetriable
from framework.kafka.transactional_confluent import _mapped
from framework.kafka.transactional_kafka_python import KafkaPythonTransactional
from framework.kernel.config import ConnectionConfig
from framework.kernel.errors import ConfigError
from framework.node.config import NodeConfig
from framework.node.transactions import transactional_id
from router.provisioning import STATE_TOPIC_CONFIG, TopicPlan, state_topic


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (KafkaError(KafkaError._FENCED, "fenced", fatal=True), ProducerFenced),
        (KafkaError(KafkaError.PRODUCER_FENCED, "fenced"), ProducerFenced),
        (KafkaError(KafkaError.INVALID_PRODUCER_EPOCH, "epoch"), ProducerFenced),
        (KafkaError(KafkaError._STATE, "broken", fatal=True), ProducerFenced),
        (KafkaError(KafkaError._INCONSISTENT, "x", txn_requires_abort=True), TransactionAborted),
        (KafkaError(KafkaError._TIMED_OUT, "slow", retriable=True), TransactionRetriable),
        (KafkaError(KafkaError.NOT_COORDINATOR, "moved", retriable=True), TransactionRetriable),
        (KafkaError(KafkaError._MSG_TIMED_OUT, "lost"), TransactionAborted),
    ],
)
def test_confluent_transactional_errors_map_to_the_layers(error: Any, expected: type) -> None:
    assert type(_mapped(KafkaException(error), "commit_transaction")) is expected


class _Manager:
    def __init__(self, *, fatal: bool = False, abortable: bool = False) -> None:
        self.fatal, self.abortable = fatal, abortable

    def has_fatal_error(self) -> bool:
        return self.fatal

    def has_abortable_error(self) -> bool:
        return self.abortable


@pytest.mark.parametrize(
    ("exc", "manager", "expected"),
    [
        (ProducerFencedError(), _Manager(fatal=True), ProducerFenced),
        (KafkaTimeoutError(), _Manager(), TransactionRetriable),
        (NotCoordinatorError(), _Manager(), TransactionRetriable),
        (NotCoordinatorError(), _Manager(abortable=True), TransactionAborted),
    ],
)
def test_kafka_python_transactional_errors_map_to_the_layers(
    exc: Exception, manager: _Manager, expected: type
) -> None:
    producer = object.__new__(KafkaPythonTransactional)
    producer.transactional_id = "a.s"
    producer._manager = manager
    assert type(producer._mapped(exc, "commit_transaction")) is expected


def test_exactly_once_is_a_delivery_mode_and_others_are_refused() -> None:
    connection = ConnectionConfig("zk:1", "kafka:1", "app")
    assert NodeConfig(connection, delivery="exactly-once").delivery == "exactly-once"
    with pytest.raises(ConfigError, match="exactly-once"):
        NodeConfig(connection, delivery="twice")  # type: ignore[arg-type]


def test_the_state_topic_is_provisioned_compacted_and_ids_follow_the_stream() -> None:
    plan = TopicPlan("app", 2)
    assert state_topic("app") in plan.all_topics()
    assert plan.configs("app.state")["cleanup.policy"] == "compact"
    assert STATE_TOPIC_CONFIG["cleanup.policy"] == "compact"
    assert transactional_id("app", "app.stream.0001") == "app.app.stream.0001"


class _FencedHandle:
    """A librdkafka producer after a fatal error: every call raises."""

    def _fatal(self, *args: Any) -> None:
        raise KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))

    abort_transaction = purge = close = _fatal


def test_closing_a_fenced_confluent_producer_raises_nothing() -> None:
    from framework.kafka.transactional_confluent import ConfluentTransactional

    producer = object.__new__(ConfluentTransactional)
    producer.transactional_id, producer._open = "a.s", True
    producer._producer = _FencedHandle()  # type: ignore[assignment]
    producer.close(0.1)  # a node dropping a fenced stream must not crash on it
