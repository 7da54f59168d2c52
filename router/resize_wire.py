"""The records of a live resize (docs/resize.md, "Record formats"): kinds beside the watermark.

Five kinds, each a msgpack map under the header `sessionizer-kind: <kind>`, each
carrying the resize's `epoch`, `from` and `to`, so the first one a stream reads
opens the epoch there:

- `resize`: a producer routes by `to` from here on (`producer` absent: the
  command's start marker);
- `migration`: one part of a session moving from `source` at its `barrier` (part 0:
  the folded session; parts 1..n-1: its raw fragments, one each);
- `migration-done`: `source` wrote every migration record of its barrier;
- `forward`: a fragment of a moved key that reached the old stream after its barrier,
  or (no key, `"end": true`) the end of input of a producer that does not route by the
  new count (its stragglers' sessions end where they went);
- `forward-seal`: `source` committed past `committed`: it never writes a record
  about an earlier offset again.

Decoding is total like `router.wire`'s: `decode_control` returns a record, None for a
record of no resize kind, or raises `UndecodableRecord` (reason `unknown-kind`, the
detail naming what is wrong) whatever the bytes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

import msgpack

from framework.kernel.errors import InvalidArgument
from framework.kernel.limits import MAX_EVENT_TIME_MS, MAX_KEY_BYTES, MIN_EVENT_TIME_MS
from framework.kernel.watermark import MAX_PRODUCER_ID_BYTES
from router.errors import RouterError, UndecodableRecord
from router.wire import (
    CONTROL_KINDS,
    DONE_KIND,
    FORWARD_KIND,
    KIND_HEADER,
    MIGRATION_KIND,
    RESIZE_KIND,
    SEAL_KIND,
)

__all__ = [
    "Control",
    "Epoch",
    "Forward",
    "ForwardEnd",
    "ForwardSeal",
    "MigrationDone",
    "MigrationPart",
    "ResizeMarker",
    "decode_control",
    "encode_control",
]

_MAX_OFFSET: Final = 2**63 - 1
_MAX_STREAMS: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class Epoch:
    """Which resize: its epoch and the stream counts before (`old`) and after (`new`)."""

    epoch: int
    old: int
    new: int

    def __post_init__(self) -> None:
        if self.epoch < 1 or not 1 <= self.old <= _MAX_STREAMS or not 1 <= self.new <= _MAX_STREAMS:
            raise InvalidArgument(f"not a resize: epoch {self.epoch}, {self.old} -> {self.new}")
        if self.old == self.new:
            raise InvalidArgument(
                f"a resize changes the stream count, got {self.old} -> {self.new}"
            )

    def is_source(self, index: int) -> bool:
        """Keys leave stream `index` (growing: every old stream; shrinking: the retired ones)."""
        return index < self.old if self.new > self.old else self.new <= index < self.old

    def is_target(self, index: int) -> bool:
        """Keys arrive at stream `index` (growing: the new streams; shrinking: the remaining)."""
        return self.old <= index < self.new if self.new > self.old else index < self.new

    def sources(self) -> range:
        """The streams whose done markers a target awaits."""
        return range(self.old) if self.new > self.old else range(self.new, self.old)

    def targets(self) -> range:
        """The streams a source writes its done marker to."""
        return range(self.old, self.new) if self.new > self.old else range(self.new)


@dataclass(frozen=True, slots=True)
class ResizeMarker:
    """`producer` routes by `epoch.new` from here on (None: the command's start marker)."""

    epoch: Epoch
    producer: str | None
    timestamp_ms: int
    offset: int | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class MigrationPart:
    """Part `part` of `parts` of the session of `key` that started at `session` on `source`."""

    epoch: Epoch
    source: str
    barrier: int
    key: str
    session: int
    part: int
    parts: int
    body: tuple[Any, ...]
    timestamp_ms: int
    offset: int | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class MigrationDone:
    """`source` wrote all its migration records of `barrier` (`sessions` of them to here);
    `ended`: its barrier was the end of input of its last live producer."""

    epoch: Epoch
    source: str
    barrier: int
    sessions: int
    timestamp_ms: int
    offset: int | None = field(default=None, compare=False)
    ended: bool = False


@dataclass(frozen=True, slots=True)
class Forward:
    """A fragment of a moved key read on `source` at `source_offset` after its barrier."""

    epoch: Epoch
    source: str
    source_offset: int
    committed: int
    key: str
    fields: dict[str, Any]
    timestamp_ms: int
    offset: int | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class ForwardSeal:
    """`source` committed past `committed`: it writes nothing about earlier offsets again."""

    epoch: Epoch
    source: str
    committed: int
    timestamp_ms: int
    offset: int | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class ForwardEnd:
    """The end of input of a producer not live on `source`, read there after its barrier."""

    epoch: Epoch
    source: str
    source_offset: int
    committed: int
    timestamp_ms: int
    offset: int | None = field(default=None, compare=False)


Control: TypeAlias = (
    ResizeMarker | MigrationPart | MigrationDone | Forward | ForwardEnd | ForwardSeal
)


def encode_control(record: Control) -> tuple[bytes | None, bytes, list[tuple[str, bytes]], int]:
    """Return the (key, value, headers, timestamp) of a resize record; the same bytes always."""
    epoch = record.epoch
    body: dict[str, Any] = {"epoch": epoch.epoch, "from": epoch.old, "to": epoch.new}
    key: str | None = None
    if isinstance(record, ResizeMarker):
        kind = RESIZE_KIND
        if record.producer is not None:
            body["producer"] = record.producer
    elif isinstance(record, MigrationPart):
        kind, key = MIGRATION_KIND, record.key
        body.update(source=record.source, barrier=record.barrier, session=record.session)
        body.update(part=record.part, parts=record.parts, body=list(record.body))
    elif isinstance(record, MigrationDone):
        kind = DONE_KIND
        body.update(source=record.source, barrier=record.barrier, sessions=record.sessions)
        if record.ended:
            body["ended"] = True
    elif isinstance(record, Forward):
        kind, key = FORWARD_KIND, record.key
        body.update(source=record.source, offset=record.source_offset)
        body.update(committed=record.committed, fields=record.fields)
    elif isinstance(record, ForwardEnd):
        kind = FORWARD_KIND
        body.update(source=record.source, offset=record.source_offset)
        body.update(committed=record.committed, end=True)
    else:
        kind = SEAL_KIND
        body.update(source=record.source, committed=record.committed)
    value: bytes = msgpack.packb(body, use_bin_type=True)
    encoded = None if key is None else key.encode("utf-8")
    return encoded, value, [(KIND_HEADER, kind)], record.timestamp_ms


def decode_control(
    key: bytes | None,
    value: bytes | None,
    headers: Iterable[tuple[str, bytes]] | None,
    timestamp_ms: int,
    offset: int,
) -> Control | None:
    """The resize record at `offset`, None if it is of no resize kind; `UndecodableRecord` if
    it is one but malformed."""
    kind = _kind(headers)
    if kind not in CONTROL_KINDS:
        return None
    try:
        return _decode(kind, key, value, timestamp_ms, offset)
    except (_Bad, InvalidArgument, ValueError, TypeError, msgpack.UnpackException) as exc:
        name = kind.decode() if isinstance(kind, bytes) else str(kind)
        detail = f"malformed {name} record: {str(exc)[:200]}"
        raise UndecodableRecord("unknown-kind", detail, offset=offset) from exc


class _Bad(RouterError):
    """A field of a resize record is not what its kind needs (always caught here)."""


def _kind(headers: Any) -> Any:
    if headers is None:
        return None
    try:
        for name, content in headers:
            if name == KIND_HEADER:
                return bytes(content) if isinstance(content, bytes | bytearray) else content
    except (TypeError, ValueError):
        return None  # router.wire dead-letters it as bad-headers
    return None


def _decode(kind: bytes, key: Any, value: Any, timestamp: Any, offset: int) -> Control:
    if not isinstance(value, bytes | bytearray):
        raise _Bad("no value")
    body = msgpack.unpackb(value, raw=False, strict_map_key=False)
    if not isinstance(body, dict):
        raise _Bad(f"expected a map, got {type(body).__name__}")
    epoch = Epoch(_int(body, "epoch"), _int(body, "from"), _int(body, "to"))
    stamp = _time(timestamp)
    if kind == RESIZE_KIND:
        producer = body.get("producer")
        if producer is not None and (
            not isinstance(producer, str)
            or not producer
            or len(producer.encode("utf-8")) > MAX_PRODUCER_ID_BYTES
        ):
            raise _Bad("producer must be a non-empty string of at most 200 bytes")
        return ResizeMarker(epoch, producer, stamp, offset)
    source = _source(body)
    if kind == MIGRATION_KIND:
        parts = _int(body, "parts", 1)
        part = _int(body, "part")
        if part >= parts:
            raise _Bad(f"part {part} of {parts}")
        content = body.get("body")
        if not isinstance(content, list):
            raise _Bad("the body is not an array")
        checked = _head(content) if part == 0 else _member(content)
        session, barrier = _int(body, "session"), _int(body, "barrier")
        return MigrationPart(
            epoch, source, barrier, _key(key), session, part, parts, checked, stamp, offset
        )
    if kind == DONE_KIND:
        barrier, sessions = _int(body, "barrier"), _int(body, "sessions")
        ended = body.get("ended", False)
        if not isinstance(ended, bool):
            raise _Bad("ended must be a bool")
        return MigrationDone(epoch, source, barrier, sessions, stamp, offset, ended)
    committed = _int(body, "committed")
    if kind == SEAL_KIND:
        return ForwardSeal(epoch, source, committed, stamp, offset)
    if body.get("end") is True:
        return ForwardEnd(epoch, source, _int(body, "offset"), committed, stamp, offset)
    fields = body.get("fields")
    if not isinstance(fields, dict) or not all(isinstance(name, str) for name in fields):
        raise _Bad("fields must be a map with string names")
    at = _int(body, "offset")
    return Forward(epoch, source, at, committed, _key(key), fields, stamp, offset)


def _head(body: list[Any]) -> tuple[Any, ...]:
    """Part 0: [first_ts, folded, tail_ts, tail_end, first folded, last folded, state, failure]."""
    if len(body) != 8:
        raise _Bad("a session head has 8 items")
    first_ts, folded, tail_ts, tail_end, low, high, state, failure = body
    _time(first_ts)
    if not _is_int(folded, 0) or not _is_int(low, 0) or not _is_int(high, 0):
        raise _Bad("folded count and offsets must be integers >= 0")
    _time(tail_ts)
    if not isinstance(tail_end, bool) or (state is not None and not isinstance(state, bytes)):
        raise _Bad("tail_end must be a bool and state bytes or nil")
    if failure is not None:
        if not isinstance(failure, list) or len(failure) != 3:
            raise _Bad("a failure is [hook, error, fragment]")
        hook, error, held = failure
        if not isinstance(hook, str) or not isinstance(error, str):
            raise _Bad("a failure's hook and error are strings")
        if held is not None and not (isinstance(held, list) and len(held) == 4):
            raise _Bad("a failure's fragment is [offset, key, timestamp, fields]")
    return tuple(body)


def _member(body: list[Any]) -> tuple[Any, ...]:
    """Part i >= 1: [event time, offset on the source, is_end, fields]."""
    if len(body) != 4:
        raise _Bad("a migrated fragment has 4 items")
    event_time, offset, is_end, fields = body
    _time(event_time)
    if not _is_int(offset, 0) or not isinstance(is_end, bool) or not isinstance(fields, dict):
        raise _Bad("a migrated fragment is [event time, offset, is_end, fields]")
    if not all(isinstance(name, str) for name in fields):
        raise _Bad("field names must be strings")
    return tuple(body)


def _is_int(value: Any, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= _MAX_OFFSET


def _int(body: dict[Any, Any], name: str, low: int = 0) -> int:
    value: Any = body.get(name)
    if not _is_int(value, low):
        raise _Bad(f"{name} must be an integer >= {low}")
    number: int = value
    return number


def _time(value: Any) -> int:
    if not _is_int(value, MIN_EVENT_TIME_MS) or value > MAX_EVENT_TIME_MS:
        raise _Bad(f"{str(value)[:40]} is not an event time")
    stamp: int = value
    return stamp


def _source(body: dict[Any, Any]) -> str:
    source = body.get("source")
    if not isinstance(source, str) or not source or len(source) > 255:
        raise _Bad("source must be a stream name")
    return source


def _key(key: Any) -> str:
    if not isinstance(key, bytes | bytearray) or not key or len(key) > MAX_KEY_BYTES:
        raise _Bad("the key must be 1 to 4096 bytes")
    try:
        return bytes(key).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Bad("the key is not UTF-8") from exc
