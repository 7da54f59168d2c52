"""`SinkStallWatch`: output that the brokers have not acknowledged for too long, made visible.

A failed send or flush rewinds the streams concerned and the node reads them again
(docs/nodes.md, "When output cannot be delivered"), so a fault that lasts (the
sessions topic deleted, an ACL that refuses the node, a producer that lost every
broker) would otherwise show only as one `sink_failed` warning per commit interval
while nothing moves.  Once output has failed with no acknowledgement in between for
`--sink-stall-timeout` seconds, the node logs one `sink_stalled` error that says
what to check, and `/readyz` answers 503 until output is acknowledged again
(`sink_recovered`).  The node keeps its streams and keeps retrying: the fault is
outside it, and every other node would meet the same one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

__all__ = ["SinkStallWatch"]

_WHAT_TO_DO = (
    "the streams are rewound and read again every commit interval until Kafka acknowledges "
    "output: check that the sessions and dead-letter topics exist, that this node may write "
    "to them, and that their leaders are reachable"
)


class SinkStallWatch:
    """Times how long output has failed without an acknowledgement; written by the loop only."""

    def __init__(self, limit: float, log: Any, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self._log = log
        self._clock = clock
        self._failing_since: float | None = None
        self._last_error = ""
        self._reported = False

    def failed(self, error: str) -> None:
        """Output failed now; past the limit since the first unacknowledged failure, say so once."""
        now = self._clock()
        if self._failing_since is None:
            self._failing_since = now
        self._last_error = error
        failing = now - self._failing_since
        if not self._reported and failing >= self.limit:
            self._reported = True
            self._log.error(
                "sink_stalled",
                seconds=round(failing, 1),
                error=error,
                note=_WHAT_TO_DO,
            )

    def delivered(self) -> None:
        """Output was acknowledged: a flush of some output, or a transaction with some, went
        through (an empty one proves nothing: a stuck producer flushes nothing at once)."""
        if self._reported and self._failing_since is not None:
            self._log.info(
                "sink_recovered", stalled_s=round(self._clock() - self._failing_since, 1)
            )
        self._failing_since = None
        self._reported = False

    def stalled(self) -> str | None:
        """Why output is stalled (once `sink_stalled` was logged), or None; read by the HTTP
        thread (`/readyz`)."""
        since = self._failing_since
        if not self._reported or since is None:
            return None
        failing = self._clock() - since
        return f"sink stalled: no output acknowledged for {failing:.0f} s ({self._last_error})"
