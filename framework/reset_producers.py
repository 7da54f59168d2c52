"""The live producers of a stream as of an offset, rebuilt from its log: what a reset keeps.

A state record carries the stream's live producers and their clocks as of its
safe offset (`StreamState.producers`, docs/sessions.md "Several producers"): with
two live producers, one producer's END does not end the input.  `sessionizer
streams reset --from-offset N` must write the live producers as of N, or the
next owner would take the first END for the end of the whole input.

They are rebuilt the way the engine builds them (`ProducerClocks`), from the
producers' records: `joined` and `left` markers, watermarks and ENDs.  The scan
starts at the current state record's safe offset S with its producers when
S <= N and the record decodes, else at the start of the log with none (records
deleted by retention before it are unknown: the result says where it began).
Fragments, undecodable records and watermarks whose time is invalid move no
producer, as in the engine.  One approximation: a watermark dated more than the
processor's `max_lead` ahead is counted at once, where the engine waits for the
next record to confirm it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from framework.kafka.consumer import assigned_consumer, partition_zero
from framework.kernel.errors import ConfigError
from framework.kernel.watermark import Watermark
from router.errors import UndecodableRecord
from router.wire import decode_parts
from sessionizer.hooks import valid_time
from sessionizer.producer_clocks import LiveProducers, ProducerClocks
from state.errors import CorruptStateError
from state.record import StreamState

__all__ = ["RebuiltProducers", "apply_records", "producers_at"]

SCAN_TIMEOUT: Final = 300.0
"""Longest a reset reads the stream's log to rebuild its producers (then: nothing is reset)."""


@dataclass(frozen=True)
class RebuiltProducers:
    """The live producers as of `offset`, and what they were rebuilt from."""

    producers: LiveProducers
    scanned_from: int
    """The first offset read (the state record's safe offset, or the log's start)."""
    scanned: int
    """How many records were read."""
    from_record: bool
    """True: the scan started from the current state record's producers."""

    def to_json(self) -> dict[str, Any]:
        """What `streams reset` prints about them."""
        return {
            "producers": [[name, clock] for name, clock in self.producers],
            "producers_from": {
                "state_record": self.from_record,
                "scanned_from": self.scanned_from,
                "records_scanned": self.scanned,
            },
        }


def apply_records(
    live: LiveProducers, records: Iterable[tuple[int, Any, Any, Any, int]], end: int
) -> LiveProducers:
    """The live producers just before offset `end`, from those of an earlier offset (`live`)
    and the records in between: (offset, key, value, headers, timestamp), in offset order."""
    clocks = ProducerClocks(None, live)  # the skew bounds stream time, not who is live
    for offset, key, value, headers, timestamp in records:
        try:
            item = decode_parts(key, value, headers, timestamp, offset=offset)
        except UndecodableRecord:
            continue  # a dead letter for the node: it moves nothing
        if not isinstance(item, Watermark) or not valid_time(item.timestamp_ms):
            continue  # fragments carry no producer; an invalid time moves no clock
        clocks.watermark(offset, item.producer, item.marker, item.timestamp_ms, item.end)
    return clocks.saved_before(end)


def producers_at(
    bootstrap: str,
    properties: Mapping[str, str],
    stream: str,
    offset: int,
    current: bytes | None,
    *,
    timeout: float = SCAN_TIMEOUT,
) -> RebuiltProducers:
    """The stream's live producers just before `offset`; `current`: its state record's bytes.

    Raises `ConfigError` (nothing is reset) if the log cannot be read up to `offset`
    within `timeout`.
    """
    base = _usable(current, stream, offset)
    start, live = (base.safe_offset, base.producers) if base is not None else (0, ())
    if offset <= start:
        return RebuiltProducers(live, start, 0, base is not None)

    consumer = assigned_consumer(
        bootstrap, "sessionizer-reset", properties, auto_offset_reset="earliest"
    )
    try:
        partition = partition_zero(stream)
        consumer.assign([partition])
        first = consumer.beginning_offsets([partition])[partition]
        start = max(start, first)
        consumer.seek(partition, start)
        records = list(_read(consumer, partition, start, offset, stream, timeout))
    finally:
        consumer.close()
    rebuilt = apply_records(live, records, offset)
    return RebuiltProducers(rebuilt, start, len(records), base is not None)


def _usable(current: bytes | None, stream: str, offset: int) -> StreamState | None:
    """The current state record, if it decodes and its safe offset is not past `offset`."""
    try:
        state = StreamState.decode(current, stream=stream)
    except CorruptStateError:
        return None  # a corrupt record (the usual reason for a reset): rebuild from the log
    return state if state.safe_offset <= offset else None


def _read(
    consumer: Any, partition: Any, start: int, end: int, stream: str, timeout: float
) -> Iterable[tuple[int, Any, Any, Any, int]]:
    """Yield the records in [start, end) as (offset, key, value, headers, timestamp)."""
    position, deadline = start, time.monotonic() + timeout
    while position < end:
        if time.monotonic() > deadline:
            raise ConfigError(
                f"{stream}: reading offsets {start}..{end - 1} to rebuild its producers took "
                f"more than {timeout:g} s (at offset {position}); nothing was reset, try again"
            )
        for batch in consumer.poll(timeout_ms=500).values():
            for record in batch:
                if start <= record.offset < end:
                    yield record.offset, record.key, record.value, record.headers, record.timestamp
        position = consumer.position(partition)
