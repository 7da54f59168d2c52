"""`NodeParts`: the collaborators a `Node` runs on, and `connect_parts`, which builds the real ones.

The real parts are a kazoo client (for the state store and the balancer), a
`KafkaRecordSource` and a `KafkaSink` (exactly-once: over the node's one
transactional producer, the state in `<app>.state`: `framework.node.exactly_once`).
Tests hand a `Node` in-memory parts instead (`framework.testkit.memory`), so the
loop's ordering guarantees are checked without servers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import TypeVar

from balancer.balancer import Balancer
from balancer.config import BalancerConfig, BalancerListener
from framework.kafka.errors import ClientError
from framework.kernel.errors import ConfigError
from framework.kernel.zookeeper import zookeeper_client
from framework.node.config import NodeConfig, announced_settings
from framework.node.errors import NodeError
from framework.node.exactly_once import exactly_once_parts
from framework.node.kafka_source import KafkaRecordSource
from framework.node.ports import Coordinator, CoordinatorFactory, RecordSource
from framework.node.resize_link import ResizeLink, open_link
from framework.node.transactions import NodeTransactions
from router.naming import deadletter_topic, sessions_topic
from router.provisioning import handover_topic
from sessionizer.kafka_sink import KafkaSink, open_kafka_sink
from sessionizer.sinks import SessionSink
from state.handover import HandoverStore
from state.handover_kafka import KafkaHandoverLog, open_handover_log
from state.handover_zookeeper import ZooKeeperPointers
from state.store import FencedStateStore, StateStore
from state.writers import ZooKeeperWriters
from state.zookeeper_store import ZooKeeperRecords

__all__ = ["NodeParts", "connect_parts"]

T = TypeVar("T")


@dataclass(frozen=True)
class NodeParts:
    """What a node reads from, writes to, stores in, and is coordinated by."""

    source: RecordSource
    sink: SessionSink
    store: StateStore
    coordinator: CoordinatorFactory
    handover: HandoverStore | None = None
    """Where planned moves hand a stream's engine over (None: every move replays)."""
    transactions: NodeTransactions | None = None
    """Exactly-once: the node's transactional producer (None: the other modes)."""
    resize: ResizeLink | None = None
    """The node's link to live resizes (None: in-process parts, which have no registry)."""


@contextmanager
def connect_parts(config: NodeConfig) -> Iterator[NodeParts]:
    """Connect to ZooKeeper and Kafka; everything is closed again on exit."""
    connection = config.connection
    client_id = f"{connection.app}-{config.node_id}"
    with ExitStack() as stack:
        client = stack.enter_context(
            zookeeper_client(
                connection.zk, auth=connection.zk_auth, session_timeout=config.session_timeout
            )
        )
        store: StateStore = FencedStateStore(
            ZooKeeperRecords(client, connection.paths.stream_states)
        )
        source = _kafka(config, lambda: _source(config, client_id))
        stack.callback(source.close)
        transactions = None
        if config.delivery == "exactly-once":
            assert isinstance(store, FencedStateStore)
            hints = store
            writers = ZooKeeperWriters(client, connection.paths.txn_writers)
            exact = _kafka(
                config, lambda: exactly_once_parts(config, client_id, hints, writers, stack)
            )
            sink: SessionSink = exact.sink
            store, transactions = exact.store, exact.transactions
        else:
            sink = _kafka(config, lambda: _sink(config, f"{client_id}-sink"))
            stack.callback(sink.close)
        handover_log = _handover_log(config, client_id)
        stack.callback(handover_log.close)
        pointers = ZooKeeperPointers(client, connection.paths.active_streams)
        handover = HandoverStore(handover_log, pointers)
        if config.handover:  # in the background: a planned move then pays no client start-up
            handover_log.open(handover.timeout)
        balancer_config = BalancerConfig(
            zk_hosts=connection.zk,
            app=connection.app,
            consumer_id=config.node_id,
            namespace=connection.namespace,
            session_timeout=config.session_timeout,
            zk_auth=connection.zk_auth,
            balance=config.balance,
            load_tolerance=config.balance_tolerance,
            load_interval=config.balance_interval,
            agreed=config.agreed,  # docs/exactly-once.md, "CLI and configuration"
            announced=announced_settings(),
        )

        def coordinator(listener: BalancerListener) -> Coordinator:
            return Balancer(balancer_config, listener, client=client)

        link = stack.enter_context(open_link(config, client))
        yield NodeParts(source, sink, store, coordinator, handover, transactions, link)


def _source(config: NodeConfig, client_id: str) -> RecordSource:
    connection = config.connection
    return KafkaRecordSource(
        connection.bootstrap,
        client_id=client_id,
        properties=connection.kafka_config,
        client=connection.kafka_client,
    )


def _sink(config: NodeConfig, client_id: str) -> KafkaSink:
    connection = config.connection
    return open_kafka_sink(
        connection.kafka_client,
        connection.bootstrap,
        sessions_topic(connection.app),
        deadletter_topic(connection.app),
        client_id=client_id,
        properties=connection.kafka_config,
        delivery_timeout=config.delivery_timeout,
        max_message_bytes=config.max_message_bytes,
    )


def _handover_log(config: NodeConfig, client_id: str) -> KafkaHandoverLog:
    """The handover topic through the node's Kafka client (`open` starts its clients)."""
    connection = config.connection
    return open_handover_log(
        connection.kafka_client,
        connection.bootstrap,
        handover_topic(connection.app),
        client_id=client_id,
        properties=connection.kafka_config,
    )


def _kafka(config: NodeConfig, connect: Callable[[], T]) -> T:
    try:
        return connect()
    except (ClientError, NodeError) as exc:
        raise ConfigError(
            f"node {config.node_id}: cannot reach Kafka at {config.connection.bootstrap} "
            f"({exc}); is the cluster up and --bootstrap / SESSIONIZER_BOOTSTRAP right?"
        ) from exc
