"""`Watermark`, the one in-band watermark type (a leaf module: it imports nothing of the project).

Like `framework.limits`, it is shared by `router` (the wire decoder returns it,
the producer encodes it) and `sessionizer` (the engine consumes it), which must
not import each other: one watermark, one type, from the wire to the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Watermark"]


@dataclass(frozen=True, slots=True)
class Watermark:
    """An in-band watermark: stream time is at least `timestamp_ms`; `end` marks end of input.

    `offset` is where the record was read (the decoder sets it when it is given
    one; the engine needs it); it is not part of the watermark's value, so it
    takes no part in equality.  `sessionizer.Watermark(offset, timestamp_ms,
    end_of_input)` builds the same type offset first.
    """

    timestamp_ms: int
    end: bool = False
    offset: int | None = field(default=None, compare=False)

    @property
    def end_of_input(self) -> bool:
        """The engine's name for `end`."""
        return self.end
