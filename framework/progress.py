"""Where each stream stands: its stored state in ZooKeeper and its end offset in Kafka."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from framework.dead_letters import DeadLetterCounts
from framework.kafka.consumer import assigned_consumer, partition_zero
from framework.kafka.errors import ClientError
from framework.kernel.config import ConnectionConfig
from framework.kernel.paths import AppPaths
from state.errors import CorruptStateError
from state.record import StreamState

__all__ = ["end_offsets", "read_records", "read_states", "state_columns"]

_END_OFFSETS_TIMEOUT_MS = 10_000
"""How long `status` waits for Kafka, to connect and then for the offsets: a monitoring
command answers in seconds, also when the brokers are down (kafka-python's own
bootstrap wait is 30 s)."""


def read_records(client: KazooClient, paths: AppPaths, streams: Iterable[str]) -> dict[str, bytes]:
    """The stored state record of each stream, undecoded (empty if none was committed yet)."""
    pending = [(s, client.get_async(paths.stream_state(s))) for s in streams]
    records = {}
    for stream, result in pending:
        try:
            records[stream] = result.get()[0] or b""
        except NoNodeError:
            records[stream] = b""
    return records


def read_states(
    client: KazooClient, paths: AppPaths, streams: Iterable[str]
) -> dict[str, StreamState]:
    """The committed state of each stream (the initial state if none was committed yet).

    Raises `CorruptStateError` for a record that cannot be decoded.
    """
    records = read_records(client, paths, streams)
    return {stream: StreamState.decode(data, stream=stream) for stream, data in records.items()}


def end_offsets(
    bootstrap: str, topics: Iterable[str], properties: Mapping[str, str] | None = None
) -> dict[str, int]:
    """The end offset (next offset to be written) of each single-partition topic."""
    partitions = [partition_zero(topic) for topic in topics]
    consumer = assigned_consumer(
        bootstrap,
        "sessionizer-status",
        properties or {},
        bootstrap_timeout_ms=_END_OFFSETS_TIMEOUT_MS,
    )
    try:
        ends = consumer.end_offsets(partitions, timeout_ms=_END_OFFSETS_TIMEOUT_MS)
        return {tp.topic: offset for tp, offset in ends.items()}
    finally:
        consumer.close()


def state_columns(
    client: KazooClient,
    connection: ConnectionConfig,
    on_kafka_error: Callable[[ClientError], None] | None = None,
) -> Callable[[Sequence[str]], dict[str, dict[str, Any]]]:
    """The `status` columns a stream's state and Kafka give (a `balancer.status.StreamColumns`).

    When Kafka cannot be read, `end_offset` is None and `on_kafka_error` is told why.
    """

    # `dead_letters`: per stream, from the dead-letter topic (incremental under --watch).
    dead = DeadLetterCounts(connection.bootstrap, connection.app, connection.kafka_config)

    def columns(streams: Sequence[str]) -> dict[str, dict[str, Any]]:
        records = read_records(client, connection.paths, streams)
        counts = None
        try:
            ends: dict[str, int | None] = dict(
                end_offsets(connection.bootstrap, streams, connection.kafka_config)
            )
            counts = dead.counts()  # only once Kafka answered: each try waits out a bootstrap
        except ClientError as exc:
            ends = dict.fromkeys(streams)  # Kafka unreachable: show the ZooKeeper view
            if on_kafka_error is not None:
                on_kafka_error(exc)
        return {
            stream: {
                **_cells(_decoded(data, stream), ends.get(stream)),
                "dead_letters": None if counts is None else counts.get(stream, 0),
            }
            for stream, data in records.items()
        }

    return columns


def _decoded(data: bytes, stream: str) -> StreamState | None:
    try:
        return StreamState.decode(data, stream=stream)
    except CorruptStateError:
        return None  # shown as blanks; the row's `corrupt` says why once it is quarantined


def _cells(state: StreamState | None, end: int | None) -> dict[str, Any]:
    """The columns in the table's order; blanks for a record that cannot be decoded."""
    return {
        "safe_offset": None if state is None else state.safe_offset,
        "committed_offset": None if state is None else state.committed_offset,
        "end_offset": end,
        "open_sessions": None if state is None else state.open_sessions,
        "ignored": None if state is None else len(state.ignore),
    }
