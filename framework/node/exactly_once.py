"""The real parts of an exactly-once node: its transactional producers, state log and store.

`connect_parts` (`framework.node.parts`) calls `exactly_once_parts` for
`--delivery exactly-once` (docs/exactly-once.md): a `NodeTransactions` over
the client choice's transactional producer (also the sink's producer), the
`read_committed` reader of `<app>.state`, and the `LogStateStore` over both and
ZooKeeper's records. The state topic is read once here: a missing topic stops
the node before it joins; an open transaction holding it back does not.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass

import structlog

from framework.kafka.transactional import (
    CommittedLog,
    NotReadToEnd,
    TransactionalProducer,
    open_committed_log,
    open_transactional_producer,
)
from framework.node.config import NodeConfig
from framework.node.transactions import NodeTransactions
from router.naming import deadletter_topic, sessions_topic
from router.provisioning import state_topic
from sessionizer.kafka_sink import KafkaSink, OutputProducerSettings
from state.log_store import LogStateStore
from state.record import DEFAULT_LIMIT_BYTES
from state.store import FencedStateStore
from state.writers import WriterRecords

__all__ = ["ExactlyOnceParts", "exactly_once_parts"]

_log = structlog.get_logger("sessionizer.node")


@dataclass(frozen=True)
class ExactlyOnceParts:
    """The sink, store and transactions of an exactly-once node."""

    sink: KafkaSink
    store: LogStateStore
    transactions: NodeTransactions


def exactly_once_parts(
    config: NodeConfig,
    client_id: str,
    hints: FencedStateStore,
    writers: WriterRecords,
    stack: ExitStack,
) -> ExactlyOnceParts:
    """Open the state log (read to its end once), the transactions and the sink over them."""
    connection = config.connection
    app = connection.app
    timeout = config.delivery_timeout
    state_log = open_committed_log(
        connection.kafka_client,
        connection.bootstrap,
        state_topic(app),
        client_id=client_id,
        properties=connection.kafka_config,
    )
    stack.callback(state_log.close)
    _warm(state_log, config.node_id, timeout)
    transactions = NodeTransactions(
        lambda tid: _producer(config, f"{client_id}-txn", tid),
        app=app,
        node=config.node_id,
        state_topic=state_topic(app),
        timeout=timeout,
        writers=writers,
    )
    stack.callback(transactions.close)
    store = LogStateStore(
        hints,
        state_log,
        before_read=transactions.open,
        prepare=transactions.open_many,
        timeout=timeout,
    )
    sink = KafkaSink(
        transactions,
        sessions_topic(app),
        deadletter_topic(app),
        delivery_timeout=timeout,
        max_message_bytes=config.max_message_bytes,
    )
    return ExactlyOnceParts(sink, store, transactions)


def _warm(state_log: CommittedLog, node: str, timeout: float) -> None:
    """Read the state log to its end once; `ClientError` if the topic is missing.

    An open transaction holding the log back does not stop the start: a dead node's
    stays open until a taker fences its id (or it times out), and this node may be
    the taker it waits for. Every take reads the log to its end again anyway.
    """
    try:
        state_log.latest(b"", timeout)
    except NotReadToEnd as exc:
        _log.warning(
            "state_log_behind",
            node=node,
            error=str(exc),
            note="starting anyway: each take reads the state log to its end",
        )


def _producer(config: NodeConfig, client_id: str, transactional_id: str) -> TransactionalProducer:
    """A transactional producer (the node's, or one fencing an id): the sink's settings, plus
    the transactional id."""
    connection = config.connection
    settings = OutputProducerSettings(
        connection.bootstrap,
        client_id,
        config.delivery_timeout,
        config.max_message_bytes,
        largest_record=max(config.max_message_bytes, DEFAULT_LIMIT_BYTES),
        properties=connection.kafka_config,
    )
    kafka_python = _kafka_python(connection.kafka_client)
    return open_transactional_producer(
        connection.kafka_client,
        transactional_id,
        kafka_python=settings.kafka_python() if kafka_python else {},
        confluent=settings.confluent(),
    )


def _kafka_python(client: str) -> bool:
    from framework.kernel.transport import resolve_transport

    return resolve_transport(client) != "confluent"
