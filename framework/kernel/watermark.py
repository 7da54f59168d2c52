"""`Watermark`, the one in-band watermark type (a leaf module: it imports nothing of the project).

Like `framework.kernel.limits`, it is shared by `router` (the wire decoder returns it,
the producer encodes it) and `sessionizer` (the engine consumes it), which must
not import each other: one watermark, one type, from the wire to the engine.

Several producers may write one stream (docs/routing.md, "Several producers"):
a watermark then names its `producer`, and two *markers* say who writes the
stream: `JOINED` (a producer starts writing it) and `LEFT` (a surviving producer
declares a dead one gone).  A watermark without a producer is the anonymous
producer of a stream with one producer, as before producers had ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal, TypeAlias

__all__ = ["JOINED", "LEFT", "MARKERS", "MAX_PRODUCER_ID_BYTES", "Marker", "Watermark"]

Marker: TypeAlias = Literal["joined", "left"]
JOINED: Final = "joined"
"""The producer starts writing the stream; its clock is the watermark (0: nothing sent yet)."""
LEFT: Final = "left"
"""The producer died without ending (written by a survivor); it no longer holds the stream."""
MARKERS: Final[tuple[Marker, ...]] = (JOINED, LEFT)
MAX_PRODUCER_ID_BYTES: Final = 200
"""The longest producer id, in UTF-8 bytes (it is a ZooKeeper path segment too)."""


@dataclass(frozen=True, slots=True)
class Watermark:
    """An in-band watermark: stream time is at least `timestamp_ms`; `end` marks end of input.

    `offset` is where the record was read (the decoder sets it when it is given
    one; the engine needs it); it is not part of the watermark's value, so it
    takes no part in equality.  `producer` names the producer that wrote it
    (None: the anonymous producer); `marker` is None for an ordinary
    watermark, else `JOINED` or `LEFT` (about `producer`).
    """

    timestamp_ms: int
    end: bool = False
    offset: int | None = field(default=None, compare=False)
    # Who wrote it and why take no part in equality either: a watermark equals another
    # that says the same about stream time (as with one producer, before producers had ids).
    producer: str | None = field(default=None, compare=False)
    marker: Marker | None = field(default=None, compare=False)

    @property
    def end_of_input(self) -> bool:
        """The engine's name for `end`."""
        return self.end
