"""The producer every writer uses (sinks, stream producer, handover log), and its one factory.

`open_producer` is the one place a writer's client is chosen: it takes the
`KafkaClient` choice (`framework.kernel.transport`) and the settings of each
client, and returns a `RecordProducer` over kafka-python or confluent-kafka.
Both report the same things: a refusal before queueing raises `SendFailed`
(`RecordTooLarge` when it is permanent), a delivery that failed later comes
back from `flush` as a `DeliveryFailure` carrying the token it was sent with.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict

from framework.kernel.transport import resolve_transport

__all__ = [
    "DeliveryFailure",
    "Headers",
    "RecordProducer",
    "RecordSender",
    "SendOptions",
    "StreamRecordProducer",
    "TopicSend",
    "open_producer",
]

Headers = list[tuple[str, bytes]]

TopicSend = Callable[[int, bytes | None, bytes, int], None]
"""`send(index, key, value, timestamp_ms)`: one record to partition 0 of the index-th topic
a `StreamRecordProducer.topic_sender` was made for, without headers or token."""


class SendOptions(TypedDict, total=False):
    """`RecordSender.send`'s keyword arguments, for a sender that only passes them on
    (`**options: Unpack[SendOptions]`): the signature is written once, in the Protocol."""

    headers: Headers | None
    partition: int | None
    timestamp_ms: int | None
    token: object


@dataclass(frozen=True)
class DeliveryFailure:
    """A record the brokers did not acknowledge."""

    topic: str
    key: bytes | None
    error: str
    detail: str
    """The client's own description (kafka-python: the error's repr)."""
    too_large: bool
    """The broker refused it as too large: sending it again fails again."""
    token: object = None
    """What the caller sent it with (None: nothing)."""
    timestamp_refused: bool = False
    """The broker refused its timestamp as too far from its own clock: sending it again fails
    again (`TimestampRefused`)."""


class RecordSender(Protocol):
    """The one call every producer of the layer shares, transactional or not."""

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        *,
        headers: Headers | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        token: object = None,
    ) -> None:
        """Queue one record; raise `SendFailed` (or `RecordTooLarge`) if it cannot be queued
        (a transactional producer: in its open transaction, or `ProducerFenced`)."""


class RecordProducer(RecordSender, Protocol):
    """What a writer needs from a Kafka client's producer."""

    def flush(self, timeout: float | None) -> list[DeliveryFailure]:
        """Wait for every queued record; return the failed deliveries since the last flush.

        Raises `FlushIncomplete` when not everything was settled within `timeout` seconds.
        """

    def close(self, timeout: float | None = None) -> None:
        """Wait up to `timeout` for what is queued, drop the rest, release the client."""

    def topic_names(self, timeout: float) -> list[str]:
        """Every topic of the cluster, from one metadata request; raises `ClientError`."""

    def warm_metadata(self, topics: Sequence[str]) -> None:
        """Learn every topic's partitions before the first send, in as few requests as can be."""


class StreamRecordProducer(RecordProducer, Protocol):
    """A producer that also offers the stream producer's fast path (`topic_sender`)."""

    def take_failures(self) -> list[DeliveryFailure]:
        """The failed deliveries known now, without waiting; each is reported once, here or
        by `flush`."""

    def topic_sender(self, topics: Sequence[str]) -> TopicSend:
        """A send to partition 0 of `topics[index]` that is one Python call per record on
        its common path; refusals raise what `send` raises (`SendFailed`, `RecordTooLarge`)."""


def open_producer(
    client: str,
    *,
    kafka_python: Callable[[], Mapping[str, Any]],
    confluent: Callable[[], Mapping[str, Any]],
) -> StreamRecordProducer:
    """The producer of the `client` choice (`auto`: confluent-kafka when installed).

    `kafka_python` gives `KafkaProducer`'s keyword arguments, `confluent` librdkafka's
    properties; only the chosen one is called. Raises `ClientError` when the client
    cannot be created.
    """
    if resolve_transport(client) == "confluent":
        from framework.kafka.confluent import ConfluentProducer

        return ConfluentProducer(confluent())
    from framework.kafka.kafka_python import KafkaPythonProducer

    return KafkaPythonProducer(kafka_python())
