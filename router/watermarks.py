"""Which streams get a watermark record, and when: a deterministic policy on event time only.

The producer's **clock** is the largest event time it has sent. A stream's time is
the latest event time among its own records (fragments and watermarks). The
policy keeps every stream within `interval_ms` of the clock and writes as few
watermarks as that allows: a stream gets a watermark (at the clock) only at the
first clock advance that would leave it more than `interval_ms` behind, so a
stream that carries traffic at least once an interval never gets one, and an
idle stream gets exactly one per interval. It reads no wall clock: the same
input always gives the same watermarks at the same places, so a replay is
identical.

With other producers writing the same streams (docs/routing.md, "Several
producers"), a stream's time as a node sees it for *this* producer moves only with
this producer's watermarks (fragments carry no producer id), so the producer sets
`fragments_count = False`: every stream then gets a watermark once per interval of
event time, busy or not.  `announce_start` sends one to every stream at the first
event time, so that the streams learn the producer's clock at once.

A fragment dated more than `max_lead_ms` ahead of the clock moves nothing until the
next fragment gives its verdict, as a node's stream time does with such a record
(docs/sessions.md, "Records dated far ahead"): a next fragment not more than
`max_lead_ms` behind it confirms the jump (a real gap in the input), which is then
taken before that fragment; any other refutes it, and it is forgotten.  Otherwise one
line of a broken clock, dated 2100, would hold the clock in 2100 and the producer
would never write a watermark again.

Cost: two comparisons per fragment, plus a heap operation per stream and interval
of event time (the streams' deadlines are kept in a heap ordered by when each
would fall behind).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from framework.kernel.errors import InvalidArgument

__all__ = ["DEFAULT_MAX_LEAD_MS", "WatermarkPolicy"]

_NONE: Sequence[int] = ()
DEFAULT_MAX_LEAD_MS = 24 * 60 * 60_000
"""How far ahead of the clock a fragment may move it without a witness: a processor's
default `max_lead`."""
_NO_LEAD = 1 << 62  # `max_lead_ms=None`: every jump is taken at once


class WatermarkPolicy:
    """Feed it every fragment's (stream, event time); it names the streams that lag."""

    __slots__ = (
        "_deadlines",
        "_interval",
        "_latest",
        "_max_lead",
        "_parked_ms",
        "_parked_stream",
        "announce_start",
        "clock_ms",
        "fragments_count",
    )

    def __init__(
        self,
        num_streams: int,
        interval_ms: int,
        *,
        announce_start: bool = False,
        max_lead_ms: int | None = DEFAULT_MAX_LEAD_MS,
    ) -> None:
        if num_streams < 1:
            raise InvalidArgument(f"num_streams must be >= 1, got {num_streams}")
        if interval_ms < 1:
            raise InvalidArgument(f"interval_ms must be >= 1, got {interval_ms}")
        if max_lead_ms is not None and max_lead_ms < 1:
            raise InvalidArgument(f"max_lead_ms must be >= 1 or None, got {max_lead_ms}")
        self._interval = interval_ms
        self._max_lead = _NO_LEAD if max_lead_ms is None else max_lead_ms
        self._parked_ms = -1  # a fragment's time too far ahead, awaiting the next's verdict
        self._parked_stream = -1
        self.clock_ms = -1
        """The producer's clock: the largest event time seen (-1 before the first)."""
        self._latest = [-1] * num_streams  # each stream's time: its latest record
        self._deadlines: list[tuple[int, int]] = []  # (time the stream would fall behind, stream)
        self.fragments_count = True
        """A fragment counts as its stream's time (False: only watermarks do)."""
        self.announce_start = announce_start
        """The first event time gets a watermark on every stream."""

    def stream_time(self, stream: int) -> int:
        """A stream's time as a node will see it: its latest fragment or watermark."""
        return self._latest[stream]

    def fragment(self, stream: int, timestamp_ms: int) -> Sequence[int]:
        """Record a fragment sent to `stream`; return the streams to send a watermark now.

        The watermark's time is `clock_ms` (already advanced to this fragment's time
        when it moved the clock); the returned streams count as being at that time.
        """
        if self._parked_ms >= 0:
            return self._verdict(stream, timestamp_ms)
        clock = self.clock_ms
        if clock >= 0 and timestamp_ms - clock > self._max_lead:
            self._parked_ms, self._parked_stream = timestamp_ms, stream
            return _NONE
        return self._take(stream, timestamp_ms)

    def _verdict(self, stream: int, timestamp_ms: int) -> Sequence[int]:
        """The parked fragment's verdict by this one: taken with it if it confirms, else dropped."""
        parked, parked_stream, lead = self._parked_ms, self._parked_stream, self._max_lead
        self._parked_ms = -1
        if timestamp_ms < parked - lead:  # refuted: forgotten
            return self.fragment(stream, timestamp_ms)
        if timestamp_ms - parked > lead:  # confirmed, and itself as far ahead: it waits in turn
            due = self._take(parked_stream, parked)
            self._parked_ms, self._parked_stream = timestamp_ms, stream
            return due
        # Confirmed: both times count, and the streams left behind are found once, at the later.
        earlier, later = (parked_stream, parked), (stream, timestamp_ms)
        if timestamp_ms < parked:
            earlier, later = later, earlier
        latest = self._latest
        if earlier[1] > latest[earlier[0]] and self.fragments_count:
            latest[earlier[0]] = earlier[1]
        return self._take(*later)

    def _take(self, stream: int, timestamp_ms: int) -> Sequence[int]:
        """Record a fragment's time on its stream and on the clock (the rule of `fragment`)."""
        latest = self._latest
        if timestamp_ms > latest[stream] and self.fragments_count:
            latest[stream] = timestamp_ms
        if timestamp_ms <= self.clock_ms:
            return _NONE
        if self.clock_ms < 0:
            self._start(timestamp_ms)
            return range(len(latest)) if self.announce_start else _NONE
        self.clock_ms = timestamp_ms
        deadlines = self._deadlines
        if deadlines[0][0] >= timestamp_ms:
            return _NONE
        return self._lagging(timestamp_ms)

    def _start(self, timestamp_ms: int) -> None:
        """The first event time starts every stream's clock: none lags before any time passed."""
        self.clock_ms = timestamp_ms
        self._latest = [max(t, timestamp_ms) for t in self._latest]
        self._deadlines = [(timestamp_ms + self._interval, s) for s in range(len(self._latest))]

    def _lagging(self, clock_ms: int) -> list[int]:
        """Pop the streams now more than an interval behind; they get a watermark at the clock."""
        deadlines, latest, interval = self._deadlines, self._latest, self._interval
        due: list[int] = []
        while deadlines[0][0] < clock_ms:
            _, stream = deadlines[0]
            deadline = latest[stream] + interval
            if deadline < clock_ms:  # nothing within an interval: a watermark
                due.append(stream)
                latest[stream] = clock_ms
                deadline = clock_ms + interval
            heapq.heapreplace(deadlines, (deadline, stream))
        due.sort()
        return due
