"""What the session engine consumes (`Fragment`, `Watermark`) and what it emits.

The engine emits `FinishedSession` for every finished session (`truncated` if
the engine closed it early to bound the stored state), `LateFragment` for a
fragment that arrived later than the processor's grace, `FutureFragment` (a
`LateFragment`) for one dated implausibly far ahead of its stream, `HookFailure`
for a fragment that a processor hook failed on, and `FoldedHookFailure` for a
fragment of a failed session that was already folded (only its offset is left);
the node sends all but the first to the dead-letter topic, so nothing read is
ever silently lost.

`Watermark` is `framework.kernel.watermark.Watermark` (public as `sessionizer.Watermark`):
the one watermark type, which the wire decoder returns too (`Watermark(timestamp_ms,
end=False, offset=None)`; the engine needs `offset`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

from framework.kernel import compiled
from framework.kernel.fragment import Fragment
from framework.kernel.frozen import native_slot_builder, slot_writers
from framework.kernel.watermark import Watermark

__all__ = [
    "FIXED_FIELDS",
    "EngineCounters",
    "EngineOutput",
    "FinishedSession",
    "FoldedHookFailure",
    "FutureFragment",
    "HookFailure",
    "LateFragment",
    "Record",
    "finished_session",
    "future_fragment",
    "late_fragment",
    "reference_session_id",
    "session_id",
]

_NATIVE: Final[Any] = compiled.native("_sessionizer_records")
"""The build's native module of the records built per session, on the compiled path."""


def reference_session_id(stream: str, first_offset: int, key: str) -> str:
    """Return the deterministic id `"<stream>:<first offset>:<8 hex of BLAKE2b(key)>"`.

    A fragment belongs to exactly one session, so (stream, first offset) alone is
    unique; the key's short hash makes ids self-checking and easier to read.  A
    replay finds the same first offset, hence the same id, for the same session.
    """
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=4).hexdigest()
    return f"{stream}:{first_offset}:{digest}"


session_id: Final[Callable[[str, int, str], str]] = (
    reference_session_id if _NATIVE is None else _NATIVE.session_id
)
"""A session's id, `reference_session_id`'s string (natively on the compiled path:
tests/unit/test_native_records.py holds the two to the same ids)."""


Record: TypeAlias = Fragment | Watermark

FIXED_FIELDS: Final = (
    "session_id",
    "key",
    "stream",
    "first_offset",
    "last_offset",
    "first_ts",
    "last_ts",
    "fragments",
)
"""The `FinishedSession` fields `to_dict` writes over the result's (then `truncated`, when
set): what the native session JSON (`sessionizer.sinks`) reads from the slots."""


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


(_id, _key, _stream, _first, _last, _first_ts, _last_ts, _fragments, _result, _truncated) = (
    slot_writers(FinishedSession)
)
_new = object.__new__


def _slotted_finished_session(
    ident: str,
    key: str,
    stream: str,
    first_offset: int,
    last_offset: int,
    first_ts: int,
    last_ts: int,
    fragments: int,
    result: dict[str, Any],
    truncated: bool,
) -> FinishedSession:
    """Return `FinishedSession(...)` of these fields, built at half the cost (the engine's)."""
    session = _new(FinishedSession)
    _id(session, ident)
    _key(session, key)
    _stream(session, stream)
    _first(session, first_offset)
    _last(session, last_offset)
    _first_ts(session, first_ts)
    _last_ts(session, last_ts)
    _fragments(session, fragments)
    _result(session, result)
    _truncated(session, truncated)
    return session


finished_session: Final[
    Callable[[str, str, str, int, int, int, int, int, dict[str, Any], bool], FinishedSession]
] = native_slot_builder(FinishedSession) or _slotted_finished_session
"""`FinishedSession(...)` of these fields, in field order, built at a fraction of the cost
(the engine's): through the slots from Python, or natively on the compiled path."""


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
    traceback: str = field(default="", compare=False, repr=False)
    """The traceback text where the hook raised ("" if it returned something unusable)."""

    @property
    def offset(self) -> int:
        """The fragment's offset (as `FoldedHookFailure.offset`)."""
        return self.fragment.offset

    @property
    def key(self) -> str:
        """The fragment's session key (as `FoldedHookFailure.key`)."""
        return self.fragment.key


@dataclass(frozen=True, slots=True)
class FoldedHookFailure:
    """A fragment of a session whose hooks failed, already folded when they did: bytes gone.

    The engine folds a fragment into its session as soon as no on-time fragment can
    sort before it, and keeps only its offset; when a hook of that session fails
    (then or later), every fragment of the session still becomes a dead letter, as
    a `HookFailure` while the engine holds its bytes, else as this: the stream and
    `offset` identify the record to re-read.
    """

    offset: int
    key: str
    hook: str
    error: str
    session_id: str
    traceback: str = field(default="", compare=False, repr=False)
    """The traceback text where the hook raised ("" if it returned something unusable)."""


EngineOutput: TypeAlias = (
    FinishedSession | LateFragment | FutureFragment | HookFailure | FoldedHookFailure
)


@dataclass(frozen=True, slots=True)
class EngineCounters:
    """What an engine has done so far (and how many sessions are open now)."""

    fragments: int
    watermarks: int
    sessions: int
    late: int
    skipped_by_ignore_list: int
    hook_failures: int
    open_sessions: int
    future: int = 0
    """Records dated more than `max_lead` ahead that the next record refuted (or an
    end-of-input watermark's time, when that far ahead)."""
    truncated: int = 0
    """Sessions closed early to keep the ignore list within its budget."""
    invalid_watermarks: int = 0
    """Watermarks whose time is not a valid event time (ignored, end of input still counts)."""


def late_fragment(
    fragment: Fragment, event_time: int, stream_time: int, grace_ms: int
) -> LateFragment:
    """Return the `LateFragment` for a fragment more than `grace_ms` behind stream time."""
    behind = stream_time - event_time
    reason = (
        f"late: event time {event_time} is {behind} ms behind stream time {stream_time}, "
        f"more than the grace of {grace_ms} ms"
    )
    return LateFragment(fragment, event_time, stream_time, reason)


def future_fragment(
    fragment: Fragment, event_time: int, stream_time: int | None, refuted_by: int, lead_ms: int
) -> FutureFragment:
    """Return the `FutureFragment` for a parked fragment that the next record refuted."""
    reason = (
        f"future: event time {event_time} was more than the max_lead of {lead_ms} ms "
        f"ahead of stream time {'(none yet)' if stream_time is None else stream_time}, and "
        f"the next record's event time {refuted_by} is {event_time - refuted_by} ms behind it"
    )
    # A stream with no time yet is measured against the record that refuted it.
    reference = stream_time if stream_time is not None else refuted_by
    return FutureFragment(fragment, event_time, reference, reason)
