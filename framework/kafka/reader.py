"""The assigned reader: the node's streams, read from offsets the node chooses, either client.

Manual assignment, no consumer group, no commits and no automatic offset reset: a
position outside the log is reported (`ReaderFetch.outside`), never silently
moved. `poll` hands out every record it took from the client and reports
failures beside them, never instead of them. `open_reader` is the one place its
client is chosen (the `KafkaClient` choice of `framework.kernel.transport`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from framework.kernel.transport import resolve_transport

__all__ = ["AssignedReader", "ReaderFetch", "open_reader"]


@dataclass(frozen=True)
class ReaderFetch:
    """What one `poll` took from the client: every record, problems beside them."""

    records: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    """Per topic, the records in offset order (kafka-python's field names)."""
    outside: Mapping[str, int] = field(default_factory=dict)
    """Topics whose read position (the value) lies outside their log."""
    errors: Mapping[str, str] = field(default_factory=dict)
    """Topics whose fetch failed transiently, with the error."""
    error: str | None = None
    """A failure not tied to one topic (a broker away, the client's own); transient."""


class AssignedReader(Protocol):
    """Reads single-partition topics from chosen offsets."""

    def assign(self, positions: Mapping[str, int]) -> None:
        """Read exactly these topics, each from the given offset."""

    def poll(self, timeout: float, max_records: int) -> ReaderFetch:
        """The next records per topic; topics outside their log and errors beside them."""

    def bounds(self, streams: Sequence[str]) -> Mapping[str, tuple[int, int]]:
        """Each topic's (log start, log end) offsets; raises `ClientError`."""

    def ends(self, streams: Sequence[str]) -> Mapping[str, int]:
        """Each assigned topic's end as its last fetch response gave it (no request)."""

    def close(self) -> None:
        """Close the consumer."""


def open_reader(
    client: str, bootstrap: str, *, client_id: str, properties: Mapping[str, str] | None = None
) -> AssignedReader:
    """The reader of the `client` choice; raises `ClientError` when Kafka cannot be reached."""
    if resolve_transport(client) == "confluent":
        from framework.kafka.confluent_reader import ConfluentReader

        return ConfluentReader(bootstrap, client_id=client_id, properties=properties)
    from framework.kafka.kafka_python_reader import KafkaPythonReader

    return KafkaPythonReader(bootstrap, client_id=client_id, properties=properties)
