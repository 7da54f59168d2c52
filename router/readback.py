"""Read single-partition topics from the beginning up to their current end, then stop."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from framework.kafka.consumer import assigned_consumer, partition_zero
from router.errors import RouterError

__all__ = ["read_topics"]


def read_topics(
    bootstrap: str,
    topics: Iterable[str],
    *,
    timeout: float = 60.0,
    properties: Mapping[str, str] | None = None,
    isolation_level: str = "read_committed",
) -> dict[str, list[Any]]:
    """Return every record of each topic's partition 0 that existed when called.

    The end offsets are taken first, so records produced meanwhile are not
    waited for; raises `RouterError` if the end is not reached within `timeout`.
    Committed records only by default: an exactly-once node writes sessions and
    dead letters in transactions, and an aborted one's records are not output.
    """
    partitions = [partition_zero(topic) for topic in topics]
    consumer = assigned_consumer(
        bootstrap,
        "sessionizer-readback",
        properties or {},
        auto_offset_reset="earliest",
        isolation_level=isolation_level,
    )
    try:
        consumer.assign(partitions)
        ends = consumer.end_offsets(partitions)
        consumer.seek_to_beginning(*partitions)
        records: dict[str, list[Any]] = {tp.topic: [] for tp in partitions}
        pending = {tp for tp in partitions if ends[tp] > 0}
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                names = sorted(tp.topic for tp in pending)
                raise RouterError(f"reading {names[:5]} did not reach the end within {timeout}s")
            for tp, batch in consumer.poll(timeout_ms=500).items():
                records[tp.topic].extend(r for r in batch if r.offset < ends[tp])
                if consumer.position(tp) >= ends[tp]:
                    pending.discard(tp)
        return records
    finally:
        consumer.close()
