"""One key's open sessions, out of one stream's engine and into another's (docs/resize.md).

A live resize moves the open sessions of the keys whose stream changes.  The engine
owns what moves, as for a handover (`SessionEngine.export_state` / `restore`), but
per key: `SessionEngine.take_sessions` removes a key's open sessions (its `Segment`s)
and `SessionEngine.restore_sessions` adds them to the new stream's engine.  This
module turns a `Segment` into the data of its migration records and back:

- part 0, the *head*: `(first_ts, folded, tail_ts, tail_end, first folded offset,
  last folded offset, state, failure)`, the folded part with the user's session
  object dumped as a handover dumps it (`dump_session`, or exact msgpack types);
- part i >= 1: one raw fragment inside the grace, `(event time, offset, is_end,
  fields)`, with its record timestamp beside it.

On the new stream each part is a record with an offset of its own, so the session is
rebuilt in that stream's offsets (`Segment.moved`) and keeps its identity (the
source stream and offsets that make its `session_id`) through the `KeyGate` the engine
consults: `admit` for every fragment it is about to place (a resize may hold it back,
take it, or find it late), `identify` for every session it finishes, and `keeps`
for every key whose sessions are due to fold or close: a source keeps a moving key's
sessions open and raw from the start of its resize to its barrier, so that fragments
the producers already sent to the new stream can still sort among them there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, Literal, Protocol, TypeAlias

import msgpack

from framework.kernel.fragment import Fragment
from sessionizer.errors import SessionError
from sessionizer.processor import StreamProcessor
from sessionizer.segment import Failure, Member, Segment
from sessionizer.session_bytes import session_dumper

__all__ = [
    "HELD",
    "LATE",
    "PLACE",
    "TAKEN",
    "Admission",
    "Head",
    "KeyGate",
    "MigratedFragment",
    "Origin",
    "Unmovable",
    "export_session",
    "restore_session",
    "session_codec",
]

Admission: TypeAlias = Literal["place", "held", "taken", "late"]
PLACE: Final = "place"
"""Place the fragment in its key's sessions, as always."""
HELD: Final = "held"
"""The gate keeps it until its key's migrated sessions are here (it moves stream time)."""
TAKEN: Final = "taken"
"""The gate sends it elsewhere (a straggler of a moved key; it moves stream time)."""
LATE: Final = "late"
"""It sorts before the folded part of its key's migrated session: a late dead letter."""

Head: TypeAlias = tuple[int, int, int, bool, int, int, bytes | None, list[Any] | None]
"""A migrated session's part 0 (see the module docstring)."""
MigratedFragment: TypeAlias = tuple[tuple[int, int, bool, dict[str, Any]], int]
"""A raw fragment's part: ((event time, offset, is_end, fields), record timestamp)."""
Origin: TypeAlias = tuple[str, int, int]
"""Where a session started: (stream, first offset, last offset there); names its id."""


class Unmovable(SessionError):
    """A session object the processor cannot dump: the session cannot move to another stream."""


class KeyGate(Protocol):
    """What a stream's engine asks the resize in progress (`framework.node.resize`)."""

    def admit(self, fragment: Fragment, event_time: int, before: int | None) -> Admission:
        """Whether to place an on-time fragment now (`before`: stream time before it)."""

    def identify(self, key: str, segment: Segment) -> Origin | None:
        """The origin of a finishing session that started on another stream, else None."""

    def keeps(self, key: str) -> bool:
        """Keep the key's sessions open and unfolded (they are about to move)."""


def session_codec(
    processor: StreamProcessor[Any],
) -> tuple[Callable[[Any], bytes], Callable[[bytes], Any]]:
    """(dump, load) of session objects, as a handover packs them; dump raises `Unmovable`."""
    dump = session_dumper(processor, Unmovable)

    def load(packed: bytes) -> Any:
        return processor.load_session(msgpack.unpackb(packed, raw=False, strict_map_key=False))

    return dump, load


def export_session(
    segment: Segment, dump: Callable[[Any], bytes]
) -> tuple[Head, list[MigratedFragment]]:
    """The parts of one open session: its head and its raw fragments (`Unmovable` if the
    session object cannot be dumped)."""
    low = high = 0
    if segment.folded:
        folded = list(segment.folded_offsets())
        low, high = min(folded), max(folded)
    failure: list[Any] | None = None
    if segment.failure is not None:
        held = segment.failure.fragment
        fragment = None if held is None else [held.offset, held.key, held.timestamp_ms, held.value]
        failure = [segment.failure.hook, segment.failure.error, fragment]
    state = dump(segment.state) if segment.folded and segment.failure is None else None
    head: Head = (
        segment.first_ts,
        segment.folded,
        segment.tail_ts,
        segment.tail_end,
        low,
        high,
        state,
        failure,
    )
    raw = [((m[0], m[1], m[2], m[4].value), m[4].timestamp_ms) for m in segment.raw]
    return head, raw


def restore_session(
    key: str,
    head: Sequence[Any],
    at: tuple[int, int | None],
    members: Sequence[tuple[Sequence[Any], int, int, int | None]],
    load: Callable[[bytes], Any],
) -> Segment:
    """Rebuild a session from its parts on the new stream.

    `at` is (offset, stream time before it) of its head record here; `members` are its
    raw fragments as (part body, record timestamp, offset here, stream time before it).
    """
    first_ts, folded, tail_ts, tail_end, _low, _high, state, failure = head
    raw: list[Member] = [
        (body[0], offset, body[2], before, Fragment(offset, key, stamp, body[3]))
        for body, stamp, offset, before in members
    ]
    lost = None
    if failure is not None:
        hook, error, held = failure
        fragment = None if held is None else Fragment(held[0], key, held[2], held[3])
        lost = Failure(hook, error, fragment)
    loaded = load(state) if state is not None else None
    return Segment.moved((first_ts, folded, tail_ts, tail_end), at, raw, loaded, lost)
