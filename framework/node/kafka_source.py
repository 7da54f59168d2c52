"""`KafkaRecordSource`: the node's `RecordSource` over the client layer's assigned reader.

The reader (`framework.kafka.reader`, kafka-python or confluent-kafka, chosen by
`open_reader`) does the reading: manual assignment, no consumer group, no
auto-commit (DESIGN section 7), no automatic offset reset, and every record it
took from the client handed out with the failures beside them. This adapter
gives its fetches as the node's `Fetched` and its failures as `NodeError`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from framework.kafka.errors import ClientError
from framework.kafka.reader import AssignedReader, open_reader
from framework.kernel.transport import KafkaClient
from framework.node.errors import NodeError
from framework.node.ports import Fetched

__all__ = ["KafkaRecordSource"]


class KafkaRecordSource:
    """Reads single-partition streams from chosen offsets."""

    def __init__(
        self,
        bootstrap: str,
        *,
        client_id: str,
        properties: Mapping[str, str] | None = None,
        client: KafkaClient = "kafka-python",
    ) -> None:
        try:
            self._reader: AssignedReader = open_reader(
                client, bootstrap, client_id=client_id, properties=properties
            )
        except ClientError as exc:  # the node's start reports it as one clear line
            raise NodeError(str(exc)) from exc

    def assign(self, positions: Mapping[str, int]) -> None:
        """Read exactly these streams, each from the given offset."""
        self._reader.assign(positions)

    def poll(self, timeout: float, max_records: int) -> Fetched:
        """The next records per stream; streams outside their log and errors beside them."""
        got = self._reader.poll(timeout, max_records)
        return Fetched(got.records, got.outside, got.errors, got.error)

    def bounds(self, streams: Sequence[str]) -> Mapping[str, tuple[int, int]]:
        """Each stream's (log start, log end) offsets."""
        try:
            return self._reader.bounds(streams)
        except ClientError as exc:
            raise NodeError(str(exc)) from exc

    def ends(self, streams: Sequence[str]) -> Mapping[str, int]:
        """Each assigned stream's end as its last fetch response gave it (no request)."""
        return self._reader.ends(streams)

    def close(self) -> None:
        """Close the reader's consumer."""
        self._reader.close()
