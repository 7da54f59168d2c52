"""Create and check an app's Kafka topics: the streams, `<app>.sessions`, `<app>.deadletter`,
`<app>.handover` (compacted: each stream's latest handover record, docs/nodes.md) and
`<app>.state` (compacted: each exactly-once stream's committed state, docs/exactly-once.md)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog

from framework.kafka.admin import admin_client, timestamp_ahead_limit_ms, wait_writable
from framework.kafka.errors import ClientError, InvalidReplication, TopicExists
from router.errors import ProvisioningError, StreamCountMismatch
from router.naming import deadletter_topic, sessions_topic, stream_index, stream_name

__all__ = [
    "CLOCK_ALLOWANCE_MS",
    "HANDOVER_TOPIC_CONFIG",
    "STATE_TOPIC_CONFIG",
    "TopicPlan",
    "check_stream_count",
    "create_stream_topics",
    "existing_stream_count",
    "grow_stream_topics",
    "handover_topic",
    "max_ahead_for_limit",
    "state_topic",
    "stream_count",
    "topics_max_ahead_ms",
    "verify_stream_topics",
]

_log = structlog.get_logger("sessionizer.provisioning")
_WRITABLE_TIMEOUT_S = 60.0
CLOCK_ALLOWANCE_MS = 60_000
"""How far this host's clock and a broker's may differ, taken off the brokers' timestamp limit."""

HANDOVER_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    # A handover can be larger than a session (open sessions, fragments within grace);
    # larger than this, the stream's next owner replays instead.
    "max.message.bytes": str(16 * 1024 * 1024 + 64 * 1024),
}
"""Topic settings of `<app>.handover`: keyed by stream, only the latest record matters."""


STATE_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    # Keep the uncompacted tail short: a node taking a stream reads the whole topic once.
    "segment.ms": "60000",
    "min.cleanable.dirty.ratio": "0.1",
    "max.message.bytes": str(2 * 1024 * 1024),
}
"""Topic settings of `<app>.state`: keyed by stream, the newest committed record matters."""


def state_topic(app: str) -> str:
    """`<app>.state`: exactly-once streams' state records, committed with their output."""
    return f"{app}.state"


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
        """Streams plus the sessions, dead-letter, handover and state topics."""
        return [
            *self.stream_topics(),
            sessions_topic(self.app),
            deadletter_topic(self.app),
            handover_topic(self.app),
            state_topic(self.app),
        ]

    def configs(self, topic: str) -> dict[str, str]:
        """The topic settings `topic` is created with."""
        # Records carry event time (old for replayed logs); time-based retention
        # would delete what a resuming node still has to re-read.
        configs = {"message.timestamp.type": "CreateTime", "retention.ms": "-1"}
        if topic == handover_topic(self.app):
            configs.update(HANDOVER_TOPIC_CONFIG)
        if topic == state_topic(self.app):
            configs.update(STATE_TOPIC_CONFIG)
        return configs


def _admin(bootstrap: str, properties: Mapping[str, str] | None = None) -> Any:
    try:
        return admin_client(bootstrap, properties, client_id="sessionizer-admin")
    except ClientError as exc:
        raise ProvisioningError(
            f"cannot reach Kafka at {bootstrap}: {exc}; is the cluster up (and, for a "
            "secured cluster, --kafka-config / SESSIONIZER_KAFKA_CONFIG right)?"
        ) from exc


def existing_stream_count(admin: Any, app: str) -> int:
    """How many `<app>.stream.NNNN` topics exist."""
    return stream_count(admin.list_topics(), app)


def stream_count(names: Iterable[str], app: str) -> int:
    """How many of the topic `names` are streams of `app`."""
    count = 0
    for name in names:
        try:
            stream_index(name, app=app)
        except ValueError:
            continue
        count += 1
    return count


def check_stream_count(names: Iterable[str], app: str, num_streams: int) -> None:
    """Raise unless the topic `names` hold exactly `num_streams` streams of `app`."""
    existing = stream_count(names, app)
    if existing == 0:
        raise ProvisioningError(
            f"app {app!r} has no stream topics; run `sessionizer streams create --count N` first"
        )
    if existing != num_streams:
        raise StreamCountMismatch(app, expected=existing, configured=num_streams)


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
        _check_replication(admin, plan, [t for t in plan.all_topics() if t in present])
        missing = [t for t in plan.all_topics() if t not in present]
        if missing:
            _create(admin, plan, missing)
        # Debug: `streams create` prints the result itself, once, on stdout.
        _log.debug("topics_ready", app=plan.app, streams=plan.num_streams, created=len(missing))
        return missing
    finally:
        admin.close()


def grow_stream_topics(
    bootstrap: str, plan: TopicPlan, *, properties: Mapping[str, str] | None = None
) -> list[str]:
    """Create the stream topics a live resize to `plan.num_streams` adds (docs/resize.md);
    return the names newly created.  Refuses fewer streams than Kafka holds."""
    admin = _admin(bootstrap, properties)
    try:
        existing = existing_stream_count(admin, plan.app)
        if existing > plan.num_streams:
            raise StreamCountMismatch(plan.app, expected=existing, configured=plan.num_streams)
        present = set(admin.list_topics())
        missing = [t for t in plan.stream_topics() if t not in present]
        if missing:
            _create(admin, plan, missing)
        return missing
    finally:
        admin.close()


def _create(admin: Any, plan: TopicPlan, topics: list[str]) -> None:
    specs = {
        name: {
            "num_partitions": 1,
            "replication_factor": plan.replication,
            "configs": plan.configs(name),
        }
        for name in topics
    }
    try:
        admin.create_topics(specs, wait_for_metadata=True)
    except TopicExists:
        pass  # a concurrent create won the race; the topics are there either way
    except InvalidReplication as exc:
        brokers = len(admin.describe_cluster().get("brokers", []))
        raise ProvisioningError(
            f"cannot create the topics of app {plan.app!r} with replication factor "
            f"{plan.replication}: the cluster has {brokers} broker(s); pass --replication "
            f"{max(1, brokers)} or less"
        ) from exc
    except ClientError as exc:
        # One line: kafka-python's message can hold the whole request (kilobytes).
        raise ProvisioningError(
            f"creating {len(topics)} topics for app {plan.app!r} failed: {_short(exc)}; "
            f"is the replication factor {plan.replication} <= the number of brokers?"
        ) from exc
    # Listed is not writable: a first send before the leader has the log can be lost.
    try:
        wait_writable(admin, topics, _WRITABLE_TIMEOUT_S)
    except ClientError as exc:
        raise ProvisioningError(
            f"created {len(topics)} topics for app {plan.app!r}, but their leaders did not "
            f"take them within {_WRITABLE_TIMEOUT_S:.0f} s: {_short(exc)}; is every broker up?"
        ) from exc


def _check_replication(admin: Any, plan: TopicPlan, existing: list[str]) -> None:
    """Refuse a --replication the app's existing topics were not created with.

    A topic keeps the factor it was created with; accepting another one silently
    would let an operator believe the streams are replicated when they are not.
    """
    if not existing:
        return
    factors = {
        str(topic["name"]): len(topic["partitions"][0]["replica_nodes"])
        for topic in admin.describe_topics(existing)  # MetadataResponse fields
        if topic.get("partitions")
    }
    other = sorted(t for t, f in factors.items() if f != plan.replication)
    if other:
        found = sorted({factors[t] for t in other})
        raise ProvisioningError(
            f"app {plan.app!r} already has {len(other)} topic(s) with replication factor "
            f"{', '.join(map(str, found))}, not {plan.replication} (e.g. {other[0]}); a "
            f"topic keeps the factor it was created with: pass --replication {found[0]}, "
            "or change the topics' replicas with kafka-reassign-partitions.sh"
        )


def _short(exc: ClientError, limit: int = 200) -> str:
    """The error's class and description (else its message's first line, cut): never
    its whole payload."""
    text = getattr(exc, "description", "") or next(iter(str(exc).splitlines()), "")
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    name = exc.client_class or type(exc).__name__  # the client's own class, as it raised it
    return f"{name} ({text})" if text else name


def verify_stream_topics(
    bootstrap: str, app: str, num_streams: int, *, properties: Mapping[str, str] | None = None
) -> None:
    """Raise unless exactly `num_streams` stream topics exist for `app`."""
    admin = _admin(bootstrap, properties)
    try:
        names = admin.list_topics()
    finally:
        admin.close()
    check_stream_count(names, app, num_streams)


def max_ahead_for_limit(limit_ms: int | None) -> int | None:
    """`ProducerConfig.max_ahead_ms` for topics that take timestamps up to `limit_ms` ahead of
    the brokers' clock (None: any): the limit less `CLOCK_ALLOWANCE_MS` (at least half of it)."""
    if limit_ms is None:
        return None
    return max(limit_ms - CLOCK_ALLOWANCE_MS, limit_ms // 2)


def topics_max_ahead_ms(
    bootstrap: str, topics: list[str], *, properties: Mapping[str, str] | None = None
) -> int | None:
    """`max_ahead_for_limit` of the least `message.timestamp.after.max.ms` of `topics`; raises
    `ClientError` when the brokers do not say (no DescribeConfigs permission, say)."""
    admin = _admin(bootstrap, properties)
    try:
        return max_ahead_for_limit(timestamp_ahead_limit_ms(admin, topics))
    finally:
        admin.close()
