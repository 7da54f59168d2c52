"""`Fragment`, the one shape of a fragment on a node's path (a leaf module, as the watermark).

The wire decoder (`router.wire.decode_fragment`) builds it from a Kafka record,
the stream task hands it to the engine as it is, and the engine keeps it while
the fragment is held raw (inside the grace), parked, or on its way to a dead
letter.  It lives in the kernel because `router` builds it and `sessionizer`
consumes it, and the two must not import each other.

A `msgspec.Struct`: immutable, compared and hashed by its fields like the frozen
dataclass it replaced, with the same repr, and made in a fifth of the time (the
node makes one per record).
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["Fragment"]


class Fragment(msgspec.Struct, frozen=True, gc=False):
    """A fragment record of a stream: offset, session key, record timestamp and decoded fields."""

    offset: int
    key: str
    timestamp_ms: int
    value: dict[str, Any]
