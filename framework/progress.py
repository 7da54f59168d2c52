"""Where each stream stands: its stored state in ZooKeeper and its end offset in Kafka."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from balancer.paths import AppPaths
from framework.config import ConnectionConfig
from state.record import StreamState

__all__ = ["end_offsets", "read_states", "state_columns"]

_END_OFFSETS_TIMEOUT_MS = 10_000


def read_states(
    client: KazooClient, paths: AppPaths, streams: Iterable[str]
) -> dict[str, StreamState]:
    """The committed state of each stream (the initial state if none was committed yet)."""
    pending = [(s, client.get_async(paths.stream_state(s))) for s in streams]
    states = {}
    for stream, result in pending:
        try:
            data = result.get()[0]
        except NoNodeError:
            data = b""
        states[stream] = StreamState.decode(data, stream=stream)
    return states


def end_offsets(bootstrap: str, topics: Iterable[str]) -> dict[str, int]:
    """The end offset (next offset to be written) of each single-partition topic."""
    partitions = [TopicPartition(topic, 0) for topic in topics]
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        client_id="sessionizer-status",
    )
    try:
        ends = consumer.end_offsets(partitions, timeout_ms=_END_OFFSETS_TIMEOUT_MS)
        return {tp.topic: offset for tp, offset in ends.items()}
    finally:
        consumer.close()


def state_columns(
    client: KazooClient, connection: ConnectionConfig
) -> Callable[[Sequence[str]], dict[str, dict[str, Any]]]:
    """The `status` columns a stream's state and Kafka give (a `balancer.status.StreamColumns`)."""

    def columns(streams: Sequence[str]) -> dict[str, dict[str, Any]]:
        states = read_states(client, connection.paths, streams)
        try:
            ends: dict[str, int | None] = dict(end_offsets(connection.bootstrap, streams))
        except KafkaError:
            ends = dict.fromkeys(streams)  # Kafka unreachable: show the ZooKeeper view
        return {
            stream: {
                "safe_offset": state.safe_offset,
                "committed_offset": state.committed_offset,
                "end_offset": ends.get(stream),
                "open_sessions": state.open_sessions,
                "ignored": len(state.ignore),
            }
            for stream, state in states.items()
        }

    return columns
