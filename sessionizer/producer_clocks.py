"""`ProducerClocks`: which producers write a stream, and the stream time they allow.

Several producers may write one stream (docs/sessions.md, "Several producers").
Each names itself in its watermarks and writes a `joined` marker when it starts;
a producer that dies without ending is declared `left` by a survivor.  All of it
is in the log, so a replay decides alike.  Per stream this module keeps the
*live* producers (joined, not yet ended or left) and each one's clock: the
largest watermark it wrote (None while it has written none).  Fragments carry no
producer id, so only watermarks move a producer's clock.

Stream time, given the record's event time `t` (the engine keeps the running max):

- at most one live producer: `t`, for every record (exactly as with one producer),
  except the END of a producer while another is live (below);
- two or more: a live producer's watermark gives `max(min clock, t - skew)`, where
  `min clock` is the slowest live producer's clock (None while one has none);
  any other record gives `t - skew`.  `skew` is the processor's
  `max_producer_skew` (None: no bound, wait for the slowest producer).

A watermark of a producer that is not live (anonymous, ended, left or never
joined) counts like a fragment.  The END (or `left`) of a live producer while
others stay live gives `max(min clock, t - skew)` over those others; a `joined`
marker moves nothing.  End of input is reached when a producer's END leaves no
producer live (an END of a producer that is not live, too, when none is live:
the anonymous producer of old).  A `left` marker never ends the input: the
producer stopped early (or died), and another may carry on.

The engine commits the live producers as of the safe offset (`saved_before`),
so a resumed engine starts from exactly the clocks the first run had there.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import Any, Final, TypeAlias

from framework.kernel.limits import MIN_EVENT_TIME_MS
from framework.kernel.watermark import JOINED, LEFT
from sessionizer.errors import ProcessorError

__all__ = [
    "DEFAULT_MAX_PRODUCER_SKEW",
    "LiveProducers",
    "ProducerClocks",
    "WatermarkVerdict",
    "skew_ms",
]

DEFAULT_MAX_PRODUCER_SKEW: Final = 60 * 60
"""Seconds: with several live producers, stream time lags the fastest one by at most this."""

LiveProducers: TypeAlias = tuple[tuple[str, int | None], ...]
"""The live producers and their clocks, sorted by id: what a state record stores."""

WatermarkVerdict: TypeAlias = tuple[int | None, bool]
"""(the stream time the record allows, or None; whether it is the end of input)."""


def skew_ms(processor: object) -> int | None:
    """The processor's `max_producer_skew` in ms (None: unbounded), validated."""
    seconds = getattr(processor, "max_producer_skew", DEFAULT_MAX_PRODUCER_SKEW)
    if seconds is None:
        return None
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not math.isfinite(seconds)
        or seconds < 0
    ):
        owner = processor.__name__ if isinstance(processor, type) else type(processor).__name__
        raise ProcessorError(
            f"{owner}.max_producer_skew must be a number of seconds >= 0 or None, got {seconds!r}"
        )
    return round(seconds * 1000)


class ProducerClocks:
    """The live producers of one stream, their clocks, and the history a commit needs."""

    __slots__ = ("_base", "_history", "_live", "_skew")

    def __init__(self, skew_ms: int | None, live: LiveProducers = ()) -> None:
        self._skew = skew_ms
        self._live: dict[str, int | None] = dict(live)
        # The live set as of each control record that changed it: (offset, state after
        # it), ascending; `_base` is the state before the first.  Pruned at commits.
        self._base: LiveProducers = self._saved()
        self._history: list[tuple[int, LiveProducers]] = []

    @property
    def several(self) -> bool:
        """True while two or more producers are live (stream time waits for the slowest)."""
        return len(self._live) > 1

    def fragment(self, event_time: int) -> int | None:
        """The stream time a fragment at `event_time` allows (None: it moves nothing)."""
        if len(self._live) <= 1:
            return event_time
        return self._bounded(event_time)

    def lead_reference(self, stream_time: int | None) -> int | None:
        """What `max_lead` measures a record's jump against: the fastest live clock, at least."""
        if len(self._live) <= 1:
            return stream_time
        clocks = [clock for clock in self._live.values() if clock is not None]
        if stream_time is not None:
            clocks.append(stream_time)
        return max(clocks) if clocks else None

    def watermark(
        self, offset: int, producer: str | None, marker: str | None, time: int, end: bool
    ) -> WatermarkVerdict:
        """Apply a watermark (or a marker): the stream time it allows, and if input ends."""
        if marker == JOINED and producer is not None:
            self._live[producer] = None if time <= MIN_EVENT_TIME_MS else time
            self._changed(offset)
            return None, False
        if producer is None or producer not in self._live:
            # Anonymous, ended, left or never joined: it speaks for no live producer.
            if marker == LEFT:
                return None, False
            return self.fragment(time), end and not self._live
        if marker == LEFT or end:
            del self._live[producer]
            self._changed(offset)
            if not self._live:
                # Only an end of input ends the input: a producer that left may come back.
                return (None, False) if marker == LEFT else (time, True)
            # Its time (a dead producer's clock, or an ended one's) speaks for no live one.
            return _latest(self._slowest(), self._bounded(time)), False
        clock = self._live[producer]
        if clock is None or time > clock:
            self._live[producer] = time
            self._changed(offset)
        if len(self._live) == 1:
            return time, False
        return _latest(self._slowest(), self._bounded(time)), False

    def saved_before(self, offset: int) -> LiveProducers:
        """The live producers just before the record at `offset` (the safe offset of a commit).

        Forgets the history before it: commits come at safe offsets that never decrease.
        """
        history = self._history
        index = bisect.bisect_left(history, offset, key=lambda item: item[0])
        if index:
            self._base = history[index - 1][1]
            del history[:index]
        return self._base

    def export_state(self) -> dict[str, Any]:
        """The whole state as msgpack-able data (for a handover)."""
        return {
            "live": [list(item) for item in self._saved()],
            "base": [list(item) for item in self._base],
            "history": [
                [offset, [list(item) for item in saved]] for offset, saved in self._history
            ],
        }

    @classmethod
    def restore_state(cls, data: dict[str, Any], skew_ms: int | None) -> ProducerClocks:
        """Rebuild from `export_state`'s data."""
        clocks = cls(skew_ms, _live(data["live"]))
        clocks._base = _live(data["base"])
        clocks._history = [(int(offset), _live(saved)) for offset, saved in data["history"]]
        return clocks

    def _bounded(self, time: int) -> int | None:
        """`time - skew`, if there is a skew and that is an event time."""
        if self._skew is None or time - self._skew < MIN_EVENT_TIME_MS:
            return None
        return time - self._skew

    def _slowest(self) -> int | None:
        """The slowest live producer's clock (None if one has none yet)."""
        clocks = self._live.values()
        return None if None in clocks else min(clocks)  # type: ignore[type-var]

    def _saved(self) -> LiveProducers:
        return tuple(sorted(self._live.items()))

    def _changed(self, offset: int) -> None:
        saved = self._saved()
        if self._history and self._history[-1][0] == offset:
            self._history[-1] = (offset, saved)
        else:
            self._history.append((offset, saved))


def _latest(first: int | None, second: int | None) -> int | None:
    """The larger of two optional times."""
    if first is None:
        return second
    return first if second is None else max(first, second)


def _live(items: Sequence[Sequence[Any]]) -> LiveProducers:
    return tuple((str(name), None if clock is None else int(clock)) for name, clock in items)
