"""Transactional producers and `read_committed` readers of a compacted log (docs/exactly-once.md).

`TransactionalProducer` is one `transactional.id`'s producer: `init` fences
every earlier producer of the id (and aborts its open transaction), `begin`,
`send`, `commit` and `abort` run one transaction. Both clients implement it;
`open_transactional_producer` is the one place the client is chosen, as
`open_committed_log` is for `CommittedLog`, the reader of the newest committed
record per key of a compacted topic. Failures are mapped to the classes below.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from framework.kafka.errors import ClientError
from framework.kafka.producer import RecordSender
from framework.kernel.transport import resolve_transport

__all__ = [
    "CommittedLog",
    "NotReadToEnd",
    "ProducerFenced",
    "TransactionAborted",
    "TransactionRetriable",
    "TransactionalProducer",
    "not_read_to_end",
    "open_committed_log",
    "open_transactional_producer",
]


class NotReadToEnd(ClientError):
    """A committed-log read did not reach the topic's end in time: an open transaction holds
    its last stable offset back (a dead writer's, until a taker fences it), or Kafka is away."""


def not_read_to_end(topic: str, left: list[int], timeout: float) -> NotReadToEnd:
    """A committed-log read that did not reach the topic's end in time (either client)."""
    return NotReadToEnd(
        f"{topic}: partitions {left} not read to their end in {timeout:g} s "
        "(an open transaction holds them back, or Kafka is away)"
    )


class ProducerFenced(ClientError):
    """A newer producer of the same transactional id exists (or the producer hit a fatal error):
    this one can never commit again."""


class TransactionAborted(ClientError):
    """The open transaction cannot commit: abort it (then a new one may begin)."""


class TransactionRetriable(ClientError):
    """The commit's outcome is not known yet (timeout, coordinator away): call `commit` again."""


class TransactionalProducer(RecordSender, Protocol):
    """One `transactional.id`'s producer, used by one thread at a time."""

    transactional_id: str

    @property
    def in_transaction(self) -> bool:
        """True between `begin` and the end of `commit` or `abort`."""
        ...

    def init(self, timeout: float) -> None:
        """Fence the id's earlier producers and abort their open transaction (before any read)."""
        ...

    def begin(self) -> None:
        """Start a transaction (local: no request)."""
        ...

    def commit(self, timeout: float) -> None:
        """Flush and commit; raises `TransactionAborted`, `TransactionRetriable` or
        `ProducerFenced`."""
        ...

    def abort(self, timeout: float) -> None:
        """Abort the open transaction (its records are never visible to `read_committed`)."""
        ...

    def close(self, timeout: float) -> None:
        """Abort what is open (best effort) and release the client."""
        ...


class CommittedLog(Protocol):
    """The newest committed record per key of a compacted topic, read with `read_committed`."""

    topic: str

    def latest(self, key: bytes, timeout: float) -> bytes | None:
        """The value of the newest committed record with `key` up to the topic's end as of now.

        None if there is none. Raises `ClientError` if the end was not reached within
        `timeout` (an open transaction holds the last stable offset back, or Kafka is away).
        """
        ...

    def close(self) -> None:
        """Release the reader."""
        ...


def open_transactional_producer(
    client: str,
    transactional_id: str,
    *,
    kafka_python: Mapping[str, Any],
    confluent: Mapping[str, Any],
) -> TransactionalProducer:
    """The transactional producer of the `client` choice; settings per client, as
    `open_producer` takes them (the transactional id is added here)."""
    if resolve_transport(client) == "confluent":
        from framework.kafka.transactional_confluent import ConfluentTransactional

        return ConfluentTransactional(transactional_id, confluent)
    from framework.kafka.transactional_kafka_python import KafkaPythonTransactional

    return KafkaPythonTransactional(transactional_id, kafka_python)


def open_committed_log(
    client: str, bootstrap: str, topic: str, *, client_id: str, properties: Mapping[str, str]
) -> CommittedLog:
    """A `read_committed` reader of every partition of `topic`, kept between reads."""
    if resolve_transport(client) == "confluent":
        from framework.kafka.transactional_confluent import ConfluentCommittedLog

        return ConfluentCommittedLog(bootstrap, topic, client_id=client_id, properties=properties)
    from framework.kafka.transactional_kafka_python import KafkaPythonCommittedLog

    return KafkaPythonCommittedLog(bootstrap, topic, client_id=client_id, properties=properties)
