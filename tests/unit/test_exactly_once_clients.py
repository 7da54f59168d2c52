"""Exactly-once settings and the client layer's mapping of transactional errors."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from kafka.errors import (
    InvalidProducerEpochError,
    KafkaTimeoutError,
    NotCoordinatorError,
    OutOfOrderSequenceNumberError,
    ProducerFencedError,
)
from kafka.errors import KafkaError as KafkaPythonError
from kafka.producer.transaction_manager import (
    ProducerIdAndEpoch,
    TransactionalRequestResult,
    TransactionManager,
    TransactionState,
)

from framework.kafka import kafka_python as kafka_python_producer
from framework.kafka.errors import ClientError, SendFailed
from framework.kafka.transactional import ProducerFenced, TransactionAborted, TransactionRetriable
from framework.kafka.transactional_confluent import _transactional
from framework.kafka.transactional_kafka_python import KafkaPythonTransactional
from framework.kernel.config import ConnectionConfig
from framework.kernel.errors import ConfigError
from framework.node.config import NodeConfig
from framework.node.transactions import node_transactional_id
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
    with pytest.raises(ClientError) as raised, _transactional("commit_transaction"):
        raise KafkaException(error)
    assert type(raised.value) is expected


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
    with pytest.raises(ClientError) as raised, producer._transactional("commit_transaction"):
        raise exc
    assert type(raised.value) is expected


def test_exactly_once_is_a_delivery_mode_and_others_are_refused() -> None:
    connection = ConnectionConfig("zk:1", "kafka:1", "app")
    assert NodeConfig(connection, delivery="exactly-once").delivery == "exactly-once"
    with pytest.raises(ConfigError, match="exactly-once"):
        NodeConfig(connection, delivery="twice")  # type: ignore[arg-type]


def test_the_state_topic_is_provisioned_compacted_and_ids_name_the_node_incarnation() -> None:
    plan = TopicPlan("app", 2)
    assert state_topic("app") in plan.all_topics()
    assert plan.configs("app.state")["cleanup.policy"] == "compact"
    assert STATE_TOPIC_CONFIG["cleanup.policy"] == "compact"
    assert node_transactional_id("app", "n1", "4f2a.0") == "app.node.n1.4f2a.0"


class _FencedHandle:
    """A librdkafka producer after a fatal error: every call raises."""

    def _fatal(self, *args: Any) -> None:
        raise KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))

    abort_transaction = purge = close = produce = _fatal


def test_closing_a_fenced_confluent_producer_raises_nothing() -> None:
    from framework.kafka.transactional_confluent import ConfluentTransactional

    producer = object.__new__(ConfluentTransactional)
    producer.transactional_id, producer._open, producer._closed = "a.s", True, False
    producer._producer = _FencedHandle()  # type: ignore[assignment]
    producer._produce = producer._producer.produce
    producer.close(0.1)  # a node dropping a fenced stream must not crash on it


# -- kafka-python's own epoch bump (KIP-360) in the middle of a transaction ----------------


class _SteppedManager(TransactionManager):  # type: ignore[misc]  # kafka-python is untyped
    """kafka-python's real transaction manager; its sender's work (an epoch bump's answer)
    is done here, at the `steps`-th look at the bump, as the I/O thread would meanwhile."""

    def __init__(self, *, refused: bool = False, steps: int = 3) -> None:
        super().__init__(transactional_id="a.s", api_version=(2, 5))
        self.refused, self.steps = refused, steps

    def is_bumping_epoch(self) -> bool:
        bumping = bool(super().is_bumping_epoch())
        if bumping:
            self.steps -= 1
            if self.steps <= 0:
                with self._lock:  # what InitProducerIdHandler.handle_response does
                    if self.refused:  # PRODUCER_FENCED: the id has a newer owner
                        self.transition_to_fatal_error(ProducerFencedError())
                    else:
                        pid = self.producer_id_and_epoch
                        self.set_producer_id_and_epoch(ProducerIdAndEpoch(pid.producer_id, 1))
                        self._complete_epoch_bump()
        return bumping


class _Sent:
    """A send's future: `exception` is set when its delivery failed (and `is_done`)."""

    exception: BaseException | None = None
    is_done = False


class _FakeKafkaProducer:
    """What `KafkaPythonTransactional` calls of `KafkaProducer`, over `_SteppedManager`; its
    `wakeup` does the I/O thread's part of a commit or abort (`overtaken`: an epoch bump
    comes first, as a produce error would start one)."""

    manager: _SteppedManager
    overtaken = False

    def __init__(self, **settings: Any) -> None:
        self._transaction_manager = self.manager
        self._accumulator = self
        self._sender = self
        self.aborted: list[BaseException] = []  # the undrained batches failed, and why
        self.sent: list[_Sent] = []

    def init_transactions(self) -> None:
        self.manager.initialize_transactions()
        self.manager._pending_requests.clear()  # sent and answered (the sender's part)
        self.manager.set_producer_id_and_epoch(ProducerIdAndEpoch(7, 0))
        self.manager._transition_to(TransactionState.READY)

    def begin_transaction(self) -> None:
        self.manager.begin_transaction()

    def send(self, topic: str, **kwargs: Any) -> _Sent:
        self.manager._fail_if_not_ready_for_send()  # as KafkaProducer.send does
        self.sent.append(_Sent())
        return self.sent[-1]

    def flush(self, timeout: float | None = None) -> None:
        pass

    def abort_undrained_batches(self, error: BaseException) -> None:
        self.aborted.append(error)

    def wakeup(self) -> None:
        manager = self.manager
        if self.overtaken:
            manager.bump_producer_id_and_epoch()  # a late produce error
            bump = max(manager._pending_requests, key=lambda queued: queued[1])  # the newest
            manager._pending_requests.remove(bump)  # its InitProducerId, sent and answered
            with manager._lock:
                manager.set_producer_id_and_epoch(ProducerIdAndEpoch(7, 1))
                manager._complete_epoch_bump()
        # The queued EndTxn: kafka-python completes it unsent when no partition was added
        # (after a bump, none is), and then fails on its own state (READY to READY).
        with contextlib.suppress(KafkaPythonError):
            manager.next_request_handler(False)

    def close(self, timeout: float | None = None) -> None:
        pass


@pytest.fixture
def bumping(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """A `KafkaPythonTransactional` over `_FakeKafkaProducer`, in a transaction with a record."""
    import framework.kafka.kafka_python as plain
    import framework.kafka.transactional_kafka_python as transactional

    def make(*, overtaken: bool = False, **manager: Any) -> Any:
        attributes = {"manager": _SteppedManager(**manager), "overtaken": overtaken}
        fake = type("Fake", (_FakeKafkaProducer,), attributes)
        for module in (plain, transactional):  # wherever the layer looks the class up
            if hasattr(module, "KafkaProducer"):
                monkeypatch.setattr(module, "KafkaProducer", fake)
        producer = KafkaPythonTransactional("a.s", {})
        producer.init(1.0)
        producer.begin()
        producer.send("app.sessions", b"k", b"v")
        return producer

    return make


def test_a_transaction_kafka_pythons_epoch_bump_ended_is_aborted_and_the_next_one_runs(
    bumping: Callable[..., Any],
) -> None:
    # The sender met OUT_OF_ORDER_SEQUENCE_NUMBER (a broker restart): kafka-python bumps the
    # epoch on its own, and the broker aborts the open transaction as it does. Seen on real
    # servers as `transaction_broken` "Cannot call send in state BUMPING_PRODUCER_EPOCH".
    producer = bumping()
    producer._manager.bump_producer_id_and_epoch()
    with pytest.raises(SendFailed, match="BUMPING_PRODUCER_EPOCH"):
        producer.send("app.sessions", b"k", b"v")  # the sink fails: the stream is rewound
    producer.abort(1.0)  # waits for the bump: the transaction is aborted, not broken
    assert not producer.in_transaction
    assert producer._producer.aborted, "records queued for the aborted transaction stay queued"
    producer.begin()  # the rewound stream's next transaction
    producer.send("app.sessions", b"k", b"v")


def test_a_refused_epoch_bump_is_fenced_and_never_takes_a_fresh_producer_id(
    bumping: Callable[..., Any],
) -> None:
    # A zombie that wakes sends with its old epoch; its bump is refused (the stream's new owner
    # has a newer epoch): it must say fenced (`producer_fenced`), not broken or aborted.
    producer = bumping(refused=True)
    producer._manager.bump_producer_id_and_epoch()
    with pytest.raises(ProducerFenced):
        producer.abort(1.0)


def test_a_bump_refused_with_invalid_producer_epoch_never_initialises_the_id_afresh(
    bumping: Callable[..., Any],
) -> None:
    # kafka-python's answer to INVALID_PRODUCER_EPOCH for its bump is a fresh InitProducerId
    # for the same transactional id, which would fence the id's newer owner.
    producer = bumping()
    manager = producer._manager
    manager.bump_producer_id_and_epoch()
    result = TransactionalRequestResult()
    with manager._lock:  # InitProducerIdHandler.handle_response, bump answered so
        manager._restart_epoch_bump_without_producer_id(60_000, result)
    assert manager.has_fatal_error()
    assert isinstance(result.exception, ProducerFencedError)
    fresh = [h for *_, h in manager._pending_requests if h.request.producer_id == -1]
    assert not fresh, "a fresh InitProducerId is queued: it would fence the id's newer owner"


def test_a_send_whose_delivery_failed_fails_the_commit_instead_of_committing_without_it(
    bumping: Callable[..., Any],
) -> None:
    # kafka-python fails a batch whose delivery timed out (a broker down longer than the
    # delivery timeout) without failing the transaction: its commit then lands without the
    # batch's sessions but with the state record that covers them.
    producer = bumping()
    producer._producer.sent[0].exception = KafkaTimeoutError("Batch expired")
    with pytest.raises(TransactionAborted, match="1 sends failed"):
        producer.commit(1.0)
    producer.abort(1.0)  # the stream is rewound and sends its sessions again
    assert not producer.in_transaction


def test_a_failed_send_fails_the_commit_also_when_thousands_of_sends_followed_it(
    bumping: Callable[..., Any],
) -> None:
    # The producer looks at its kept sends every few thousand and lets the done ones go: a
    # failed one must still fail the transaction's commit.
    producer = bumping()
    failed = producer._producer.sent[0]
    failed.exception, failed.is_done = KafkaTimeoutError("Batch expired"), True
    for _ in range(3 * kafka_python_producer._SETTLE_EVERY):
        producer.send("app.sessions", b"k", b"v")
    assert producer.unsettled == 3 * kafka_python_producer._SETTLE_EVERY  # in flight
    with pytest.raises(TransactionAborted, match="1 sends failed"):
        producer.commit(1.0)


def test_a_commit_an_epoch_bump_overtook_is_of_unknown_outcome_never_committed_or_aborted(
    bumping: Callable[..., Any],
) -> None:
    # The bump aborts the open transaction at the broker, and kafka-python then reports the
    # EndTxn it never sent as done. Had the EndTxn gone first, the commit would have landed.
    producer = bumping(overtaken=True)
    with pytest.raises(TransactionAborted, match="epoch was bumped"):
        producer.commit(1.0)
    with pytest.raises(ClientError, match="outcome unknown"):
        producer.abort(1.0)  # so the stream is dropped (`broken`), never rewound


def test_a_produce_refused_for_a_fenced_epoch_fences_instead_of_bumping_the_epoch(
    bumping: Callable[..., Any],
) -> None:
    # A zombie that wakes is told INVALID_PRODUCER_EPOCH; kafka-python would bump its epoch
    # with the epoch just before the newer owner's, which the coordinator takes for a retry of
    # the newer owner's bump and answers with the newer owner's epoch: the zombie could commit.
    manager = bumping()._manager
    found = manager.classify_batch_error(InvalidProducerEpochError(), batch=None)
    assert found == TransactionManager.ERROR_CLASS_FATAL
    # A sequence error after a broker restart still bumps (and ends the transaction aborted).
    found = manager.classify_batch_error(OutOfOrderSequenceNumberError(), batch=None)
    assert found == TransactionManager.ERROR_CLASS_NEEDS_EPOCH_BUMP


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_the_transactional_producer_has_the_sinks_settings_plus_room_for_a_state_record(
    monkeypatch: pytest.MonkeyPatch, client: str
) -> None:
    # It had kafka-python's default 16 KiB batches: a wake-up of its I/O thread every few
    # dozen sessions, 12 % of an exactly-once node's samples (profile_node, 2026-11-26).
    from framework.node import exactly_once
    from sessionizer.kafka_sink import OutputProducerSettings
    from state.record import DEFAULT_LIMIT_BYTES

    opened: dict[str, Any] = {}
    monkeypatch.setattr(
        exactly_once, "open_transactional_producer", lambda c, tid, **kw: opened.update(kw)
    )
    connection = ConnectionConfig("zk:1", "kafka:1", "app", kafka_client=client)  # type: ignore[arg-type]
    config = NodeConfig(connection, delivery="exactly-once", max_message_bytes=100_000)
    exactly_once._producer(config, "c", "app.node.n1.x.0")
    sink = OutputProducerSettings("kafka:1", "c", config.delivery_timeout, 100_000, 100_000, {})
    largest = max(100_000, DEFAULT_LIMIT_BYTES) + 64 * 1024
    if client == "kafka-python":
        settings, expected = opened["kafka_python"], sink.kafka_python()
        assert settings["batch_size"] == 100_000
        assert settings["max_request_size"] == largest
    else:
        settings, expected = opened["confluent"], sink.confluent()
        assert settings["message.max.bytes"] == largest
    same = set(expected) - {"max_request_size", "message.max.bytes", "partitioner"}
    assert {k: settings[k] for k in same} == {k: expected[k] for k in same}
