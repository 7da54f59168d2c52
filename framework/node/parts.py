"""`NodeParts`: the collaborators a `Node` runs on, and `connect_parts`, which builds the real ones.

The real parts are a kazoo client (for the state store and the balancer), a
`KafkaRecordSource` and a `KafkaSink`. Tests hand a `Node` in-process fakes
instead (`tests/unit/node_fakes.py`), so the loop's ordering guarantees are
checked without servers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import TypeVar

from kafka.errors import KafkaError

from balancer.balancer import Balancer
from balancer.config import BalancerConfig, BalancerListener
from framework.errors import ConfigError
from framework.node.config import NodeConfig
from framework.node.kafka_source import KafkaRecordSource
from framework.node.ports import Coordinator, CoordinatorFactory, RecordSource
from framework.zookeeper import zookeeper_client
from router.naming import deadletter_topic, sessions_topic
from sessionizer.kafka_sink import KafkaSink
from sessionizer.sinks import SessionSink
from state.store import FencedStateStore, StateStore
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


@contextmanager
def connect_parts(config: NodeConfig) -> Iterator[NodeParts]:
    """Connect to ZooKeeper and Kafka; everything is closed again on exit."""
    connection = config.connection
    client_id = f"{connection.app}-{config.node_id}"
    with ExitStack() as stack:
        client = stack.enter_context(
            zookeeper_client(connection.zk, session_timeout=config.session_timeout)
        )
        store = FencedStateStore(ZooKeeperRecords(client, connection.paths.stream_states))
        bootstrap = connection.bootstrap
        source = _kafka(config, lambda: KafkaRecordSource(bootstrap, client_id=client_id))
        stack.callback(source.close)
        sink = _kafka(config, lambda: KafkaSink(
            connection.bootstrap,
            sessions_topic(connection.app),
            deadletter_topic(connection.app),
            client_id=f"{client_id}-sink",
            delivery_timeout=config.delivery_timeout,
            max_message_bytes=config.max_message_bytes,
        ))  # fmt: skip
        stack.callback(sink.close)
        balancer_config = BalancerConfig(
            zk_hosts=connection.zk,
            app=connection.app,
            consumer_id=config.node_id,
            namespace=connection.namespace,
            session_timeout=config.session_timeout,
        )

        def coordinator(listener: BalancerListener) -> Coordinator:
            return Balancer(balancer_config, listener, client=client)

        yield NodeParts(source, sink, store, coordinator)


def _kafka(config: NodeConfig, connect: Callable[[], T]) -> T:
    try:
        return connect()
    except KafkaError as exc:
        raise ConfigError(
            f"node {config.node_id}: cannot reach Kafka at {config.connection.bootstrap} "
            f"({exc}); is the cluster up and --bootstrap / SESSIONIZER_BOOTSTRAP right?"
        ) from exc
