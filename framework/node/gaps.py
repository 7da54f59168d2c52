"""`OffsetGaps`: the node's refusal of records past their stream's read position.

A node applies a stream's records in offset order from its task's position. The
streams are plain single-partition topics, never compacted and never written in
transactions, so their offsets are dense: a record past the position means the
records before it were skipped (lost beside a fetch error, say), and applying it
would let the next commit move past them. Such a record is refused, counted
(`gaps_reseeked`) and the stream re-read from its position. A compacted or
transactional topic could have real holes: the same hole found on every re-read
quarantines the stream instead of re-reading it for ever.
"""

from __future__ import annotations

from typing import Any

from framework.node.stats import NodeStats

__all__ = ["GAP_LIMIT", "OffsetGaps"]

GAP_LIMIT = 3
"""Re-reads that find the same hole in a stream before it is quarantined."""


class OffsetGaps:
    """Counts and logs refused records; names the holes that re-reading does not close."""

    def __init__(self, stats: NodeStats, log: Any) -> None:
        self._stats = stats
        self._log = log
        self._open: dict[str, tuple[int, int]] = {}  # stream -> (position, re-reads) of its hole

    def refuse(self, stream: str, position: int, offset: int) -> str | None:
        """A record at `offset` came for a stream at `position`; the quarantine reason, if any."""
        self._stats.gaps_reseeked += 1
        self._log.warning(
            "offset_gap",
            stream=stream,
            position=position,
            offset=offset,
            note="record refused; re-reading the stream from its position",
        )
        seen, times = self._open.get(stream, (-1, 0))
        times = times + 1 if seen == position else 1
        if times < GAP_LIMIT:
            self._open[stream] = (position, times)
            return None
        del self._open[stream]
        return (
            f"offsets {position} to {offset - 1} are missing from the log: {times} re-reads "
            "found the same hole (a compacted or transactional topic?)"
        )

    def passed(self, stream: str, position: int) -> None:
        """The stream was read up to `position`: a hole before it was a skipped fetch."""
        if stream in self._open and position > self._open[stream][0]:
            del self._open[stream]
