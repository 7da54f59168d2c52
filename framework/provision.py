"""Provision an app's streams (Kafka topics first, then the ZooKeeper registry), and reset one."""

from __future__ import annotations

from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from balancer import quarantine
from framework.kafka.errors import ClientError
from framework.kernel.config import ConnectionConfig
from framework.kernel.errors import ConfigError
from framework.kernel.paths import AppPaths
from framework.kernel.zookeeper import app_client, ensure_app
from framework.progress import end_offsets
from framework.reset_producers import producers_at
from router.provisioning import TopicPlan, create_stream_topics
from router.registry import check_stream_count, register_streams
from sessionizer.producer_clocks import LiveProducers
from state.errors import FencedError
from state.record import StreamState
from state.zookeeper_store import ZooKeeperRecords

__all__ = ["provision_streams", "reset_stream"]

# A reset re-reads and retries when an owner's commit or a take moved the version meanwhile.
_RESET_ATTEMPTS = 5


def provision_streams(connection: ConnectionConfig, count: int, replication: int = 1) -> int:
    """Create the topics and register the streams (idempotent); return topics newly created.

    The recorded count is checked before Kafka is touched, so a mismatch changes
    nothing; the registry is written last, so a node never sees a stream whose
    topic does not exist.  With `connection.zk_auth` every znode created gets
    that identity's ACL (`framework.kernel.zookeeper.app_acl`); an app protected by
    another identity fails with `ZooKeeperAccessError` before Kafka is touched.
    """
    plan = TopicPlan(connection.app, count, replication)
    registry = connection.paths.active_streams
    with app_client(connection) as client:
        check_stream_count(client, registry, connection.app, count)
        created = create_stream_topics(
            connection.bootstrap, plan, properties=connection.kafka_config
        )
        ensure_app(client, connection.paths)
        register_streams(client, registry, connection.app, plan.stream_topics())
    return len(created)


def reset_stream(connection: ConnectionConfig, stream: str, from_offset: int) -> dict[str, Any]:
    """Restart `stream` at `from_offset` with a fresh state record, and lift its quarantine.

    The record `StreamState(stream, safe_offset=N, committed_offset=N,
    producers=...)` keeps the stream's live producers as of N, rebuilt from the
    current record and the log (`framework.reset_producers`): with two producers
    live at N, one producer's END must not end the whole input.  It is written
    with a version-checked write through `ZooKeeperRecords` (the one fenced
    writer), which bumps the version and so fences any current owner; the
    quarantine marker is deleted only after that.  Returns what `streams reset`
    prints: `{"stream", "from_offset", "was_corrupt", "producers", "producers_from"}`.
    """
    if from_offset < 0:
        raise ConfigError(f"--from-offset must be >= 0, got {from_offset}")
    paths = connection.paths
    with app_client(connection) as client:
        _check_stream(client, paths, stream)
        _check_offset(connection, stream, from_offset)
        current = _current_record(client, paths, stream)
        try:
            rebuilt = producers_at(
                connection.bootstrap, connection.kafka_config, stream, from_offset, current
            )
        except ClientError as exc:
            raise ConfigError(
                f"cannot read {stream} from Kafka at {connection.bootstrap} to rebuild its "
                f"producers ({exc!r}); nothing was reset"
            ) from exc
        _write_fresh(client, paths, stream, from_offset, rebuilt.producers)
        marker = quarantine.clear(client, paths, stream)
    reason = None if marker is None else str(marker.get("reason", "unknown"))
    done = {"stream": stream, "from_offset": from_offset, "was_corrupt": reason}
    return {**done, **rebuilt.to_json()}


def _check_stream(client: KazooClient, paths: AppPaths, stream: str) -> None:
    try:
        streams = client.get_children(paths.active_streams)
    except NoNodeError:
        streams = []
    if stream not in streams:
        raise ConfigError(
            f"{stream!r} is not one of app {paths.app}'s {len(streams)} streams "
            f"(registered under {paths.active_streams}); check the name and --app"
        )


def _check_offset(connection: ConnectionConfig, stream: str, from_offset: int) -> None:
    try:
        end = end_offsets(connection.bootstrap, [stream], connection.kafka_config).get(stream)
    except ClientError as exc:
        raise ConfigError(
            f"cannot read the end offset of {stream} from Kafka at {connection.bootstrap} "
            f"({exc!r}); nothing was reset"
        ) from exc
    if end is None:
        raise ConfigError(f"Kafka has no end offset for {stream}; nothing was reset")
    if from_offset > end:
        raise ConfigError(
            f"--from-offset {from_offset} is past the end of {stream} (end offset {end}, "
            "the next offset to be written); nothing was reset"
        )


def _current_record(client: KazooClient, paths: AppPaths, stream: str) -> bytes | None:
    """The stream's state record as it is now (None: never taken yet)."""
    try:
        data, _ = ZooKeeperRecords(client, paths.stream_states).read(stream)
    except FencedError:  # no znode yet
        return None
    return data


def _write_fresh(
    client: KazooClient, paths: AppPaths, stream: str, offset: int, producers: LiveProducers
) -> int:
    """Write the fresh record over whatever version is there; return the new version."""
    records = ZooKeeperRecords(client, paths.stream_states)
    client.ensure_path(records.path(stream))  # never taken yet: an empty record
    for _ in range(_RESET_ATTEMPTS):
        _, version = records.read(stream)
        fresh = StreamState(
            stream,
            epoch=version + 1,
            safe_offset=offset,
            committed_offset=offset,
            producers=producers,
        )
        try:
            return records.write(stream, fresh.encode(), version)
        except FencedError:
            continue  # an owner committed, or a node took the stream, meanwhile: read again
    raise ConfigError(
        f"{stream}: its state kept changing under the reset ({_RESET_ATTEMPTS} attempts); "
        "nothing was reset, try again"
    )
