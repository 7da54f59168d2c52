"""`StreamState`, the record a stream's owner persists, and its byte encoding.

Layout: one marker byte (`0x00` plain, `0x01` zlib) followed by a msgpack map::

    {"v": format version, "stream": name, "epoch": lease epoch,
     "safe": safe offset, "committed": read position at the commit,
     "time": stream time as of the safe offset (ms) or nil,
     "ignore": [[key, first_ts, last_ts, last_offset, tail_offset], ...],
     "blob": user bytes or nil, "open": open sessions at the commit,
     "producers": [[producer id, clock ms or nil], ...]}   (only when non-empty)

`producers` are the live producers of a stream that several producers write, as
of the safe offset (`sessionizer.producer_clocks`); a record without it (every
record written before producers had ids) has none.

An empty or absent record means "never committed": start from offset 0.

Both directions are total. A `StreamState` validates its fields when it is built
(offsets, epoch and counts are integers in [0, `MAX_OFFSET`], times are in the
event-time range of `framework.kernel.limits`, keys are at most `MAX_KEY_BYTES` of UTF-8,
the blob at most `MAX_BLOB_BYTES`), so `encode` can only fail with
`StateTooLargeError`; `decode` returns a valid `StreamState` or raises
`CorruptStateError` for any bytes, and never inflates more than `MAX_BODY_BYTES`.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import msgpack

from framework.kernel.frozen import native_slot_builder, slot_writers
from framework.kernel.limits import MAX_EVENT_TIME_MS, MAX_KEY_BYTES, MIN_EVENT_TIME_MS
from framework.kernel.watermark import MAX_PRODUCER_ID_BYTES
from state.errors import CorruptStateError, StateError, StateTooLargeError

__all__ = [
    "COMPRESS_ABOVE_BYTES",
    "DEFAULT_LIMIT_BYTES",
    "FORMAT_VERSION",
    "JUTE_MAXBUFFER",
    "MAX_BLOB_BYTES",
    "MAX_BODY_BYTES",
    "MAX_OFFSET",
    "MAX_PRODUCERS",
    "IgnoreEntry",
    "StreamState",
    "ignore_entry",
]

FORMAT_VERSION: Final = 1
JUTE_MAXBUFFER: Final = 0xFFFFF
"""ZooKeeper's default `jute.maxbuffer` (1,048,575 bytes): the largest znode it accepts."""
DEFAULT_LIMIT_BYTES: Final = 1_000_000
"""Default size limit of an encoded record: below `jute.maxbuffer`, leaving room for framing."""
COMPRESS_ABOVE_BYTES: Final = 1024
"""Records larger than this are zlib-compressed (ignore lists repeat keys and nearby numbers)."""
MAX_OFFSET: Final = 2**63 - 1
"""The largest Kafka offset (a signed 64-bit integer); epochs and session counts share it."""
MAX_BLOB_BYTES: Final = 64 * 1024
"""The largest user blob stored with a stream's state (it is meant for small processor state)."""
MAX_BODY_BYTES: Final = 16 * 1024 * 1024
"""The largest msgpack body, before compression, written or read.

A 1 MB record of very repetitive keys inflates to about 10 MiB; the bound keeps a
damaged or hostile record (a zlib bomb) from making a node allocate without limit.
"""

MAX_PRODUCERS: Final = 1000
"""The most live producers a stream's record carries (about 210 bytes each at most)."""

_PLAIN: Final = 0x00
_ZLIB: Final = 0x01
_FIELDS: Final = ("epoch", "safe", "committed", "time", "ignore", "blob", "open")
_EVENT_TIME_RANGE: Final = f"[{MIN_EVENT_TIME_MS}, {MAX_EVENT_TIME_MS}]"


@dataclass(frozen=True, slots=True)
class IgnoreEntry:
    """A finished session that a replay from the safe offset will meet again, and must skip."""

    key: str
    first_ts: int
    last_ts: int
    last_offset: int
    tail_offset: int
    """Offset of the session's last fragment in event-time order (its END fragment, if any)."""

    def covers(self, offset: int, timestamp_ms: int) -> bool:
        """Return True if a fragment of this key at `offset`/`timestamp_ms` belonged here."""
        if offset > self.last_offset or not self.first_ts <= timestamp_ms <= self.last_ts:
            return False
        # A new session of the same key may start at the very millisecond an END fragment
        # closed this one; event-time order puts it after the END, i.e. at a larger offset.
        return timestamp_ms < self.last_ts or offset <= self.tail_offset

    def to_list(self) -> list[Any]:
        """Return the compact form stored in the record."""
        return [self.key, self.first_ts, self.last_ts, self.last_offset, self.tail_offset]


_key, _first_ts, _last_ts, _last_offset, _tail_offset = slot_writers(IgnoreEntry)
_new = object.__new__


def _slotted_ignore_entry(
    key: str, first_ts: int, last_ts: int, last_offset: int, tail_offset: int
) -> IgnoreEntry:
    """Return `IgnoreEntry(...)` of these fields, built at half the cost (once per session)."""
    entry = _new(IgnoreEntry)
    _key(entry, key)
    _first_ts(entry, first_ts)
    _last_ts(entry, last_ts)
    _last_offset(entry, last_offset)
    _tail_offset(entry, tail_offset)
    return entry


ignore_entry: Final[Callable[[str, int, int, int, int], IgnoreEntry]] = (
    native_slot_builder(IgnoreEntry) or _slotted_ignore_entry
)
"""`IgnoreEntry(...)` of these fields, in field order, built at a fraction of the cost (once
per session): through the slots from Python, or natively on the compiled path."""


class _InvalidState(StateError, ValueError):
    """A field of a `StreamState` is out of range; `problem` says which and why."""

    def __init__(self, stream: object, problem: str) -> None:
        self.problem = problem
        super().__init__(f"stream {stream}: {problem}")


@dataclass(frozen=True, slots=True)
class StreamState:
    """What a stream's owner persists: where to resume and what to skip when it does."""

    stream: str
    epoch: int = 0
    safe_offset: int = 0
    committed_offset: int = 0
    stream_time_ms: int | None = None
    """Stream time just before the record at `safe_offset` (None: nothing seen yet)."""
    ignore: tuple[IgnoreEntry, ...] = ()
    user_blob: bytes | None = None
    open_sessions: int = 0
    """Sessions open at the commit (for `status`; a replay re-opens them from the log)."""
    format_version: int = FORMAT_VERSION
    producers: tuple[tuple[str, int | None], ...] = ()
    """The live producers and their clocks as of the safe offset, sorted by id (several
    producers write the stream; docs/sessions.md)."""

    def __post_init__(self) -> None:
        # Validating here, once, is what makes `encode` total: a state msgpack could not
        # carry, or that `decode` would refuse, cannot even be built. The engine builds
        # one per commit, so the cost is one pass over the ignore list per commit.
        problem = _problem(self)
        if problem is not None:
            raise _InvalidState(self.stream, problem)

    @classmethod
    def initial(cls, stream: str, epoch: int = 0) -> StreamState:
        """Return the state of a stream that was never committed: start from offset 0."""
        return cls(stream=stream, epoch=epoch)

    def encode(self, *, limit: int | None = None) -> bytes:
        """Return the record's bytes; raise `StateTooLargeError` if they exceed `limit`."""
        fields: dict[str, object] = {
            "v": self.format_version,
            "stream": self.stream,
            "epoch": self.epoch,
            "safe": self.safe_offset,
            "committed": self.committed_offset,
            "time": self.stream_time_ms,
            "ignore": [entry.to_list() for entry in self.ignore],
            "blob": self.user_blob,
            "open": self.open_sessions,
        }
        if self.producers:  # absent, not empty: records of one producer stay as they were
            fields["producers"] = [list(item) for item in self.producers]
        body = msgpack.packb(fields, use_bin_type=True)
        if len(body) > MAX_BODY_BYTES:  # `decode` would refuse to inflate it
            raise StateTooLargeError(
                self.stream,
                size=len(body),
                limit=MAX_BODY_BYTES,
                entries=len(self.ignore),
                uncompressed=True,
            )
        data = bytes([_PLAIN]) + body
        if len(body) > COMPRESS_ABOVE_BYTES:
            data = bytes([_ZLIB]) + zlib.compress(body, 6)
        if limit is not None and len(data) > limit:
            raise StateTooLargeError(
                self.stream, size=len(data), limit=limit, entries=len(self.ignore)
            )
        return data

    @classmethod
    def decode(cls, data: bytes | None, *, stream: str) -> StreamState:
        """Decode a record of `stream`; empty or absent data is the initial state."""
        if not data:
            return cls.initial(stream)
        if not isinstance(data, bytes | bytearray | memoryview):
            raise CorruptStateError(stream, f"expected bytes, got {type(data).__name__}")
        marker, payload = data[0], bytes(data[1:])
        if marker == _ZLIB:
            payload = _inflate(payload, stream)
        elif marker != _PLAIN:
            raise CorruptStateError(stream, f"unknown marker byte {marker:#04x}")
        elif len(payload) > MAX_BODY_BYTES:
            raise CorruptStateError(stream, f"body of {len(payload)} bytes, over {MAX_BODY_BYTES}")
        try:
            # strict_map_key (the default): only str/bytes keys, so no unhashable-key TypeError.
            fields = msgpack.unpackb(payload, raw=False)
        except (ValueError, TypeError, OverflowError, msgpack.UnpackException) as exc:
            # ValueError covers ExtraData, FormatError, StackError and invalid UTF-8.
            raise CorruptStateError(stream, f"{type(exc).__name__}: {exc}") from exc
        return _from_fields(fields, stream)


def _inflate(payload: bytes, stream: str) -> bytes:
    """Decompress a zlib body, refusing to produce more than `MAX_BODY_BYTES`."""
    inflater = zlib.decompressobj()
    try:
        body = inflater.decompress(payload, MAX_BODY_BYTES + 1)
    except zlib.error as exc:
        raise CorruptStateError(stream, f"{type(exc).__name__}: {exc}") from exc
    if len(body) > MAX_BODY_BYTES:
        raise CorruptStateError(
            stream, f"the body decompresses to more than {MAX_BODY_BYTES} bytes"
        )
    if not inflater.eof:
        raise CorruptStateError(stream, "the zlib stream is truncated")
    if inflater.unused_data:
        raise CorruptStateError(
            stream, f"{len(inflater.unused_data)} bytes after the end of the zlib stream"
        )
    return body


def _from_fields(fields: Any, stream: str) -> StreamState:
    """Build the state a decoded msgpack value describes, or raise `CorruptStateError`."""
    if not isinstance(fields, dict):
        raise CorruptStateError(stream, f"expected a map, got {type(fields).__name__}")
    version = fields.get("v")
    if type(version) is not int or version != FORMAT_VERSION:
        raise CorruptStateError(
            stream, f"format version {_show(version)}; this code reads version {FORMAT_VERSION}"
        )
    if fields.get("stream") != stream:
        raise CorruptStateError(
            stream, f"the record belongs to stream {_show(fields.get('stream'))}"
        )
    missing = [name for name in _FIELDS if name not in fields]
    if missing:
        raise CorruptStateError(stream, f"missing field {missing[0]!r}")
    raw_ignore = fields["ignore"]
    if not isinstance(raw_ignore, list):
        raise CorruptStateError(stream, f"ignore is a {type(raw_ignore).__name__}, not a list")
    ignore = []
    for index, item in enumerate(raw_ignore):
        if not isinstance(item, list) or len(item) != 5:
            raise CorruptStateError(
                stream, f"ignore[{index}] is {_show(item, 80)}, not a list of 5 values"
            )
        ignore.append(IgnoreEntry(*item))
    producers = _producers_field(fields.get("producers", []), stream)
    try:
        # No conversions (int(), bytes()): a value of the wrong type is corruption, and
        # `__post_init__` checks every type and range.
        return StreamState(
            stream=stream,
            epoch=fields["epoch"],
            safe_offset=fields["safe"],
            committed_offset=fields["committed"],
            stream_time_ms=fields["time"],
            ignore=tuple(ignore),
            user_blob=fields["blob"],
            open_sessions=fields["open"],
            producers=producers,
        )
    except _InvalidState as exc:
        raise CorruptStateError(stream, exc.problem) from exc


def _producers_field(raw: Any, stream: str) -> tuple[tuple[str, int | None], ...]:
    """The `producers` of a decoded record, shaped (`_problem` checks the values)."""
    if not isinstance(raw, list):
        raise CorruptStateError(stream, f"producers is a {type(raw).__name__}, not a list")
    for index, item in enumerate(raw):
        if not isinstance(item, list) or len(item) != 2:
            raise CorruptStateError(
                stream, f"producers[{index}] is {_show(item, 80)}, not a list of 2 values"
            )
    return tuple((item[0], item[1]) for item in raw)


def _producers_problem(producers: object) -> str | None:
    """Return what is wrong with a state's live producers, or None."""
    if not isinstance(producers, tuple):
        return f"producers is a {type(producers).__name__}, not a tuple"
    if len(producers) > MAX_PRODUCERS:
        return f"{len(producers)} live producers, over {MAX_PRODUCERS}"
    names: list[str] = []
    for index, item in enumerate(producers):
        if not isinstance(item, tuple) or len(item) != 2:
            return f"producers[{index}] is {_show(item, 80)}, not an (id, clock) pair"
        name, clock = item
        encoded = _utf8(name) if isinstance(name, str) else None
        if not encoded or len(encoded) > MAX_PRODUCER_ID_BYTES:
            return f"producers[{index}]: id {_show(name, 80)} is not a producer id"
        if clock is not None and not _is_event_time(clock):
            return f"producers[{index}]: clock {_show(clock)} is not an event time or nil"
        names.append(name)
    if names != sorted(set(names)):
        return "producers are not sorted by id, or an id repeats"
    return None


def _problem(state: StreamState) -> str | None:
    """Return what is wrong with a state's fields, or None if they are all in range."""
    if not isinstance(state.stream, str) or not _utf8(state.stream):
        return f"stream name {_show(state.stream)} is not a UTF-8 string"
    if state.format_version != FORMAT_VERSION or type(state.format_version) is not int:
        return f"format_version {_show(state.format_version)}; only {FORMAT_VERSION} is written"
    for name in ("epoch", "safe_offset", "committed_offset", "open_sessions"):
        value = getattr(state, name)
        if not _is_int(value) or not 0 <= value <= MAX_OFFSET:
            return f"{name} {_show(value)} is not an integer in [0, 2**63-1]"
    if state.safe_offset > state.committed_offset:
        return (
            f"need 0 <= safe_offset ({state.safe_offset}) "
            f"<= committed_offset ({state.committed_offset})"
        )
    time = state.stream_time_ms
    if time is not None and not _is_event_time(time):
        return f"stream_time_ms {_show(time)} is not an event time in {_EVENT_TIME_RANGE}"
    blob = state.user_blob
    if blob is not None and (not isinstance(blob, bytes) or len(blob) > MAX_BLOB_BYTES):
        what = f"{len(blob)} bytes" if isinstance(blob, bytes) else f"a {type(blob).__name__}"
        return f"user_blob is {what}; it must be None or bytes, at most {MAX_BLOB_BYTES}"
    producers = _producers_problem(state.producers)
    if producers is not None:
        return producers
    if not isinstance(state.ignore, tuple):
        return f"ignore is a {type(state.ignore).__name__}, not a tuple of IgnoreEntry"
    for index, entry in enumerate(state.ignore):
        problem = _entry_problem(entry)
        if problem is not None:
            return f"ignore[{index}]: {problem}"
    return None


def _entry_problem(entry: object) -> str | None:
    """Return what is wrong with one ignore-list entry, or None."""
    if not isinstance(entry, IgnoreEntry):
        return f"a {type(entry).__name__}, not an IgnoreEntry"
    key = entry.key
    if not isinstance(key, str) or not key:
        return f"key {_show(key, 80)} is not a non-empty string"
    encoded = _utf8(key)
    if encoded is None:
        return f"key {_show(key, 80)} is not valid UTF-8"
    if len(encoded) > MAX_KEY_BYTES:
        return f"key is {len(encoded)} bytes in UTF-8, over {MAX_KEY_BYTES}"
    for name in ("first_ts", "last_ts"):
        value = getattr(entry, name)
        if not _is_event_time(value):
            return f"{name} {_show(value)} is not an event time in {_EVENT_TIME_RANGE}"
    if entry.first_ts > entry.last_ts:
        return f"first_ts {entry.first_ts} > last_ts {entry.last_ts}"
    for name in ("last_offset", "tail_offset"):
        value = getattr(entry, name)
        if not _is_int(value) or not 0 <= value <= MAX_OFFSET:
            return f"{name} {_show(value)} is not an integer in [0, 2**63-1]"
    return None


def _is_int(value: object) -> bool:
    """Return True for an int that is not a bool (True is not an offset)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _is_event_time(value: object) -> bool:
    """Return True for an int (not a bool) in the event-time range."""
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and MIN_EVENT_TIME_MS <= value <= MAX_EVENT_TIME_MS
    )


def _utf8(text: str) -> bytes | None:
    """Return `text` in UTF-8, or None if it cannot be encoded."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: msgpack could not write it
        return None


def _show(value: object, limit: int = 100) -> str:
    """Return a bounded repr that cannot raise (a huge int's repr can)."""
    try:
        return repr(value)[:limit]
    except Exception:  # a problem text must never be the thing that crashes
        return f"<{type(value).__name__}>"
