"""`KafkaHandoverLog`: the `HandoverLog` over the `<app>.handover` topic, either Kafka client.

The topic is compacted and keyed by stream, so it keeps each stream's latest
record.  The client is the layer's keyed log (`framework.kafka.keyed_log`,
kafka-python or confluent-kafka, chosen by `open_handover_log`): `write_many`
sends all of a release's records to partition 0, then waits once (at most its
timeout) for the acknowledgement of all in-sync replicas, returning each
record's offset or why it has none; `read_many` reads the records of many
streams forward in one pass with a reader kept for all reads, and gives up at
its deadline.  Both clients take the node's client properties (security
settings).  `open`, called when a node with handovers on starts, creates the
producer and the reader in the background, so a move pays no client start-up;
otherwise the first write or read creates them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from framework.kafka.errors import ClientError
from framework.kafka.keyed_log import KeyedLog, Unwritten, open_keyed_log
from state.errors import StateError, caused_by
from state.handover import Written

__all__ = ["MAX_HANDOVER_BYTES", "KafkaHandoverLog", "open_handover_log"]

MAX_HANDOVER_BYTES: Final = 16 * 1024 * 1024
"""The largest handover record sent (the topic's `max.message.bytes`); larger: replay."""
_REQUEST_BYTES: Final = MAX_HANDOVER_BYTES + 64 * 1024


class KafkaHandoverLog:
    """The handover topic through the client layer's keyed log."""

    def __init__(self, log: KeyedLog) -> None:
        self._log = log
        self.topic = log.topic

    def open(self, timeout: float) -> None:
        """Start the producer and the reader in the background (see `KeyedLog.open`)."""
        self._log.open(timeout)

    def write_many(self, records: Sequence[tuple[str, bytes]], timeout: float) -> list[Written]:
        """Send every record, flush once, then collect each one's offset (or why not)."""
        keyed = [(stream.encode("utf-8"), data) for stream, data in records]
        outcomes = self._log.write_many(keyed, timeout)
        return [
            StateError(f"stream {stream}: handover record {outcome.why}")
            if isinstance(outcome, Unwritten)
            else outcome
            for (stream, _), outcome in zip(records, outcomes, strict=True)
        ]

    def read_many(
        self, wanted: Mapping[str, int], timeout: float
    ) -> dict[str, bytes | StateError | None]:
        """Each stream's record at its offset, read forward in one pass: its bytes if it is
        the stream's (None: gone or another's), or why it was not read in time."""
        try:
            found = self._log.read_many(list(wanted.values()), timeout)
        except ClientError as exc:
            return {stream: _unread(stream, f"handover {exc}", exc) for stream in wanted}
        return {
            stream: _mine(*found[offset], offset, stream)
            if offset in found
            else _unread(stream, f"handover record not read within {timeout:g} s")
            for stream, offset in wanted.items()
        }

    def close(self) -> None:
        """Close the reader and the producer, if they were opened."""
        self._log.close()


def open_handover_log(
    client: str, bootstrap: str, topic: str, *, client_id: str, properties: Mapping[str, str]
) -> KafkaHandoverLog:
    """The handover log over the `client` choice (`auto`: confluent-kafka when installed)."""
    log = open_keyed_log(
        client,
        bootstrap,
        topic,
        client_id=client_id,
        properties=properties,
        max_request_bytes=_REQUEST_BYTES,
    )
    return KafkaHandoverLog(log)


def _unread(stream: str, why: str, cause: BaseException | None = None) -> StateError:
    return caused_by(StateError(f"stream {stream}: {why}"), cause)


def _mine(
    found: int, key: bytes | None, value: bytes | None, wanted: int, stream: str
) -> bytes | None:
    """The value if the record at `wanted` is there and is the stream's (compaction may drop it)."""
    if found != wanted or key != stream.encode("utf-8") or value is None:
        return None
    return value
