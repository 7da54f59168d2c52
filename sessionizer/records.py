"""What the session engine consumes (`Fragment`, `Watermark`) and what it emits.

The engine emits `FinishedSession` for every finished session (`truncated` if
the engine closed it early to bound the stored state), `LateFragment` for a
fragment that arrived later than the processor's grace, `FutureFragment` (a
`LateFragment`) for one dated implausibly far ahead of its stream, and
`HookFailure` for a fragment that a processor hook failed on; the node sends
all but the first to the dead-letter topic, so nothing read is ever silently lost.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, TypeAlias

__all__ = [
    "EngineOutput",
    "FinishedSession",
    "Fragment",
    "FutureFragment",
    "HookFailure",
    "LateFragment",
    "Record",
    "Watermark",
    "session_id",
]


def session_id(stream: str, first_offset: int, key: str) -> str:
    """Return the deterministic id `"<stream>:<first offset>:<8 hex of BLAKE2b(key)>"`.

    A fragment belongs to exactly one session, so (stream, first offset) alone is
    unique; the key's short hash makes ids self-checking and easier to read.  A
    replay finds the same first offset, hence the same id, for the same session.
    """
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=4).hexdigest()
    return f"{stream}:{first_offset}:{digest}"


@dataclass(frozen=True, slots=True)
class Fragment:
    """A fragment record of a stream: session key, record timestamp and decoded fields."""

    offset: int
    key: str
    timestamp_ms: int
    value: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Watermark:
    """An in-band watermark record: stream time is at least `timestamp_ms`."""

    offset: int
    timestamp_ms: int
    end_of_input: bool = False


Record: TypeAlias = Fragment | Watermark


@dataclass(frozen=True, slots=True)
class FinishedSession:
    """A finished session: where it lies in its stream, its event-time span and its result."""

    session_id: str
    key: str
    stream: str
    first_offset: int
    last_offset: int
    first_ts: int
    last_ts: int
    fragments: int
    result: dict[str, Any]
    truncated: bool = False
    """Closed early to keep the stream's stored state bounded (see docs/sessions.md)."""

    def to_dict(self) -> dict[str, Any]:
        """Return one flat dict: the result's fields, then the fixed fields (which win)."""
        fixed = {
            "session_id": self.session_id,
            "key": self.key,
            "stream": self.stream,
            "first_offset": self.first_offset,
            "last_offset": self.last_offset,
            "first_ts": self.first_ts,
            "last_ts": self.last_ts,
            "fragments": self.fragments,
        }
        if self.truncated:  # only then: ordinary sessions keep their exact JSON
            fixed["truncated"] = True
        return {**self.result, **fixed}


@dataclass(frozen=True, slots=True)
class LateFragment:
    """A fragment whose event time was more than the grace behind stream time: not sessionized."""

    fragment: Fragment
    event_time_ms: int
    stream_time_ms: int
    reason: str


@dataclass(frozen=True, slots=True)
class FutureFragment(LateFragment):
    """A fragment dated more than `max_lead` ahead of its stream that the next record refuted.

    A `LateFragment` subclass, so a consumer that knows only late fragments still
    dead-letters it; `reason` starts with "future:".
    """


@dataclass(frozen=True, slots=True)
class HookFailure:
    """A fragment that a processor hook raised on (`session_id` set if a session was lost)."""

    fragment: Fragment
    hook: str
    error: str
    session_id: str | None = None


EngineOutput: TypeAlias = FinishedSession | LateFragment | FutureFragment | HookFailure
