"""Create and check an app's Kafka topics: the streams, `<app>.sessions`, `<app>.deadletter`,
and `<app>.handover` (compacted: each stream's latest handover record, docs/nodes.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import structlog
from kafka import KafkaAdminClient
from kafka.errors import KafkaError, TopicAlreadyExistsError

from framework.kafka_settings import kafka_python_config
from router.errors import ProvisioningError, StreamCountMismatch
from router.naming import deadletter_topic, sessions_topic, stream_index, stream_name

__all__ = [
    "HANDOVER_TOPIC_CONFIG",
    "TopicPlan",
    "create_stream_topics",
    "existing_stream_count",
    "handover_topic",
    "verify_stream_topics",
]

_log = structlog.get_logger("sessionizer.provisioning")

HANDOVER_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    # A handover can be larger than a session (open sessions, fragments within grace);
    # larger than this, the stream's next owner replays instead.
    "max.message.bytes": str(16 * 1024 * 1024 + 64 * 1024),
}
"""Topic settings of `<app>.handover`: keyed by stream, only the latest record matters."""


def handover_topic(app: str) -> str:
    """`<app>.handover`: the records planned moves hand to the next owner."""
    return f"{app}.handover"


@dataclass(frozen=True)
class TopicPlan:
    """The topics of one app."""

    app: str
    num_streams: int
    replication: int = 1

    def stream_topics(self) -> list[str]:
        """`<app>.stream.0000` .. in index order."""
        return [stream_name(self.app, i) for i in range(self.num_streams)]

    def all_topics(self) -> list[str]:
        """Streams plus the sessions, dead-letter and handover topics."""
        return [
            *self.stream_topics(),
            sessions_topic(self.app),
            deadletter_topic(self.app),
            handover_topic(self.app),
        ]

    def configs(self, topic: str) -> dict[str, str]:
        """The topic settings `topic` is created with."""
        # Records carry event time (old for replayed logs); time-based retention
        # would delete what a resuming node still has to re-read.
        configs = {"message.timestamp.type": "CreateTime", "retention.ms": "-1"}
        if topic == handover_topic(self.app):
            configs.update(HANDOVER_TOPIC_CONFIG)
        return configs


def _admin(bootstrap: str, properties: Mapping[str, str] | None = None) -> KafkaAdminClient:
    settings = kafka_python_config(
        properties or {},
        KafkaAdminClient.DEFAULT_CONFIG,
        bootstrap_servers=bootstrap,
        client_id="sessionizer-admin",
    )
    try:
        return KafkaAdminClient(**settings)
    except KafkaError as exc:
        raise ProvisioningError(
            f"cannot reach Kafka at {bootstrap}: {exc}; is the cluster up (and, for a "
            "secured cluster, --kafka-config / SESSIONIZER_KAFKA_CONFIG right)?"
        ) from exc


def existing_stream_count(admin: KafkaAdminClient, app: str) -> int:
    """How many `<app>.stream.NNNN` topics exist."""
    count = 0
    for name in admin.list_topics():
        try:
            stream_index(name, app=app)
        except ValueError:
            continue
        count += 1
    return count


def create_stream_topics(
    bootstrap: str, plan: TopicPlan, *, properties: Mapping[str, str] | None = None
) -> list[str]:
    """Create the app's topics (single-partition); return the names newly created.

    Running it again with the same count is a no-op; with another count it
    raises `StreamCountMismatch`, because re-hashing keys onto a different set
    of streams would split sessions.
    """
    admin = _admin(bootstrap, properties)
    try:
        existing = existing_stream_count(admin, plan.app)
        if existing and existing != plan.num_streams:
            raise StreamCountMismatch(plan.app, expected=existing, configured=plan.num_streams)
        present = set(admin.list_topics())
        missing = [t for t in plan.all_topics() if t not in present]
        if missing:
            specs = {
                name: {
                    "num_partitions": 1,
                    "replication_factor": plan.replication,
                    "configs": plan.configs(name),
                }
                for name in missing
            }
            try:
                admin.create_topics(specs, wait_for_metadata=True)
            except TopicAlreadyExistsError:
                pass  # a concurrent create won the race; the topics are there either way
            except KafkaError as exc:
                raise ProvisioningError(
                    f"creating {len(missing)} topics for app {plan.app!r} failed: {exc}; "
                    f"is the replication factor {plan.replication} <= the number of brokers?"
                ) from exc
        _log.info("topics_ready", app=plan.app, streams=plan.num_streams, created=len(missing))
        return missing
    finally:
        admin.close()


def verify_stream_topics(
    bootstrap: str, app: str, num_streams: int, *, properties: Mapping[str, str] | None = None
) -> None:
    """Raise unless exactly `num_streams` stream topics exist for `app`."""
    admin = _admin(bootstrap, properties)
    try:
        existing = existing_stream_count(admin, app)
    finally:
        admin.close()
    if existing == 0:
        raise ProvisioningError(
            f"app {app!r} has no stream topics; run `sessionizer streams create --count N` first"
        )
    if existing != num_streams:
        raise StreamCountMismatch(app, expected=existing, configured=num_streams)
