"""`KafkaRecordSource`: the node's `RecordSource` over one kafka-python `KafkaConsumer`.

Manual assignment, no consumer group, no auto-commit (DESIGN section 7), and
no automatic offset reset: a position outside the log is reported as
`PositionOutOfRange`, never silently moved to the start or the end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kafka import TopicPartition
from kafka.errors import KafkaError, OffsetOutOfRangeError

from framework.kafka_settings import assigned_consumer
from framework.node.errors import NodeError, PositionOutOfRange
from framework.node.ports import SourceRecord

__all__ = ["KafkaRecordSource"]

_BOUNDS_TIMEOUT_MS = 10_000


class KafkaRecordSource:
    """Reads single-partition streams from chosen offsets."""

    def __init__(
        self, bootstrap: str, *, client_id: str, properties: Mapping[str, str] | None = None
    ) -> None:
        self._consumer = assigned_consumer(
            bootstrap, client_id, properties or {}, auto_offset_reset="none"
        )

    def assign(self, positions: Mapping[str, int]) -> None:
        """Read exactly these streams, each from the given offset."""
        partitions = [TopicPartition(stream, 0) for stream in positions]
        self._consumer.assign(partitions)
        for partition in partitions:
            self._consumer.seek(partition, positions[partition.topic])

    def poll(self, timeout: float, max_records: int) -> Mapping[str, Sequence[SourceRecord]]:
        """The next records per stream; `PositionOutOfRange` names streams outside their log."""
        try:
            batches = self._consumer.poll(timeout_ms=int(timeout * 1000), max_records=max_records)
        except OffsetOutOfRangeError as exc:
            positions = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}
            outside = {tp.topic: offset for tp, offset in positions.items()}
            raise PositionOutOfRange(outside) from exc
        except KafkaError as exc:
            raise NodeError(f"reading the streams failed ({exc!r}); retrying") from exc
        return {partition.topic: records for partition, records in batches.items()}

    def bounds(self, streams: Sequence[str]) -> Mapping[str, tuple[int, int]]:
        """Each stream's (log start, log end) offsets."""
        partitions = [TopicPartition(stream, 0) for stream in streams]
        try:
            starts = self._consumer.beginning_offsets(partitions, timeout_ms=_BOUNDS_TIMEOUT_MS)
            ends = self._consumer.end_offsets(partitions, timeout_ms=_BOUNDS_TIMEOUT_MS)
        except (KafkaError, KeyError) as exc:
            # kafka-python 3.0 answers without a partition whose leader it does not know yet
            # (a KeyError in its own lookup): transient, like a broker away.
            raise NodeError(f"cannot read the bounds of {len(streams)} streams ({exc!r})") from exc
        return {tp.topic: (starts[tp], ends[tp]) for tp in partitions}

    def ends(self, streams: Sequence[str]) -> Mapping[str, int]:
        """Each assigned stream's end as its last fetch response gave it (no request)."""
        assigned = {tp.topic for tp in self._consumer.assignment()}
        ends = {}
        for stream in streams:
            if stream in assigned:
                end = self._consumer.highwater(TopicPartition(stream, 0))
                if end is not None:
                    ends[stream] = int(end)
        return ends

    def close(self) -> None:
        """Close the consumer."""
        self._consumer.close()
