"""`KafkaPythonReader`: the assigned reader (`framework.kafka.reader`) over kafka-python.

Manual assignment, no consumer group, no auto-commit (DESIGN section 7), and
no automatic offset reset: a position outside the log is reported
(`ReaderFetch.outside`), never silently moved to the start or the end.

kafka-python 3.0 raises from `poll` only when it hands out no record in that
call: an error met after some records were drained from its fetch buffer is
kept for the next call (`Fetcher.fetched_records`, as the Java client does), and
the buffered records of the other partitions stay queued. So an exception here
never stands for records taken from the client (`tests/unit/test_record_source_gaps.py`
checks this against kafka-python's own fetcher), and the node's gap check
catches it if a later version changes that.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kafka import TopicPartition

from framework.kafka.consumer import assigned_consumer
from framework.kafka.errors import CLIENT, ClientError, PositionOutside
from framework.kafka.reader import ReaderFetch

__all__ = ["KafkaPythonReader"]

_BOUNDS_TIMEOUT_MS = 10_000
_FETCH_MAX_BYTES = 4 * 1024 * 1024
"""The most one fetch response may carry (kafka-python's default: 50 MiB): a quarter of a
second of a node's records or more (benchmarks/HOT_PATH.md, round 16)."""


class KafkaPythonReader:
    """Reads single-partition streams from chosen offsets."""

    def __init__(
        self, bootstrap: str, *, client_id: str, properties: Mapping[str, str] | None = None
    ) -> None:
        try:
            with CLIENT:
                # A node behind its streams held each 50 MiB response until its last record
                # was taken, and waited for the next: a `--kafka-config` value still wins.
                self._consumer = assigned_consumer(
                    bootstrap,
                    client_id,
                    properties or {},
                    auto_offset_reset="none",
                    fetch_max_bytes=_FETCH_MAX_BYTES,
                )
        except ClientError as exc:  # the node's start reports it as one clear line
            raise ClientError(f"cannot reach Kafka at {bootstrap} ({exc})") from exc

    def assign(self, positions: Mapping[str, int]) -> None:
        """Read exactly these streams, each from the given offset."""
        partitions = [TopicPartition(stream, 0) for stream in positions]
        self._consumer.assign(partitions)
        for partition in partitions:
            self._consumer.seek(partition, positions[partition.topic])

    def poll(self, timeout: float, max_records: int) -> ReaderFetch:
        """The next records per stream; streams outside their log and errors beside them."""
        try:
            with CLIENT:
                batches = self._consumer.poll(
                    timeout_ms=int(timeout * 1000), max_records=max_records
                )
        except PositionOutside as exc:
            if not exc.positions:  # no stream named: said out loud, retried, never skipped
                return ReaderFetch(error=f"a read position is outside its log ({exc.detail})")
            return ReaderFetch(outside=exc.positions)
        except ClientError as exc:
            return ReaderFetch(error=f"reading the streams failed ({exc.detail}); retrying")
        return ReaderFetch({partition.topic: records for partition, records in batches.items()})

    def bounds(self, streams: Sequence[str]) -> Mapping[str, tuple[int, int]]:
        """Each stream's (log start, log end) offsets."""
        partitions = [TopicPartition(stream, 0) for stream in streams]
        try:
            with CLIENT:
                starts = self._consumer.beginning_offsets(partitions, timeout_ms=_BOUNDS_TIMEOUT_MS)
                ends = self._consumer.end_offsets(partitions, timeout_ms=_BOUNDS_TIMEOUT_MS)
        except ClientError as exc:
            raise ClientError(
                f"cannot read the bounds of {len(streams)} streams ({exc.detail})"
            ) from exc
        except KeyError as exc:
            # kafka-python 3.0 answers without a partition whose leader it does not know yet
            # (a KeyError in its own lookup): transient, like a broker away.
            raise ClientError(
                f"cannot read the bounds of {len(streams)} streams ({exc!r})"
            ) from exc
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
