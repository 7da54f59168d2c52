"""How fragments and watermarks are laid out in Kafka records (a cross-language contract).

- Fragment: key = the session key in UTF-8 (1 to `MAX_KEY_BYTES` bytes), value =
  msgpack map of the fields (string names at the top level), timestamp = event
  time in epoch milliseconds within [`MIN_EVENT_TIME_MS`, `MAX_EVENT_TIME_MS`],
  no headers needed (other headers are ignored).
- Watermark: key = none, header `sessionizer-kind: watermark`, value = msgpack
  `{"watermark": <epoch ms>, "end": <bool>}`, timestamp = the watermark. The
  watermark is an integer in the event-time range (a float is accepted only when
  finite and integral, e.g. `1.7e12`); `end` may be left out (false) but when
  present must be a boolean; other members are ignored.  With several producers
  (docs/routing.md, "Several producers") it also carries `"producer": <id>` (a
  non-empty string of at most `MAX_PRODUCER_ID_BYTES` UTF-8 bytes) and, for a
  marker, `"marker": "joined" | "left"` (which needs a producer).

The records of a live resize (`resize`, `migration`, `migration-done`, `forward`,
`forward-seal`; docs/resize.md) are kinds of their own beside the watermark: their
codec is `router.resize_wire`, and the decoders here dead-letter them as
`unknown-kind` like any kind they do not know (a node decodes them with
`router.resize_wire.decode_control` first).

`Watermark` is `framework.kernel.watermark.Watermark`, the one watermark type the engine
consumes too (a decoded one carries the record's offset when given one).

The node's decoder has a fast path: on the compiled hot path (`framework.kernel.compiled`)
the native `WireDecoder` (router/native, Rust) decodes a fragment record of the exact
types the Kafka clients give (bytes, an int timestamp, a list of header pairs without a
kind header) into the same `Fragment`, and gives every other record back to the Python
decoder here, the reference, which decides it (tests/unit/test_native_wire.py).

Decoding is total: `decode_fragment` (the node's path) returns a `Fragment` (the
one fragment shape on a node's path, `framework.kernel.fragment`) or a `Watermark`,
`decode_record` a `ParsedFragment` or a `Watermark`; both raise `UndecodableRecord`
with one of the reason codes of `UndecodableReason` instead, whatever bytes, headers
and timestamp they are given. The codes are documented in docs/routing.md ("Kafka
records and dead-letter reasons").
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable
from typing import Any, Final, NoReturn, cast

import msgpack

from framework.kernel import compiled
from framework.kernel.errors import InvalidArgument
from framework.kernel.fragment import Fragment
from framework.kernel.limits import MAX_EVENT_TIME_MS, MAX_KEY_BYTES, MIN_EVENT_TIME_MS
from framework.kernel.watermark import MARKERS, MAX_PRODUCER_ID_BYTES, Watermark
from router.errors import MalformedLine, UndecodableReason, UndecodableRecord
from router.fragment import ParsedFragment

__all__ = [
    "CONTROL_KINDS",
    "DONE_KIND",
    "FORWARD_KIND",
    "KIND_HEADER",
    "MIGRATION_KIND",
    "RESIZE_KIND",
    "SEAL_KIND",
    "WATERMARK_KIND",
    "decode_fragment",
    "decode_parts",
    "decode_record",
    "encode_fragment",
    "encode_watermark",
    "native_decoder",
    "producer_problem",
]

KIND_HEADER = "sessionizer-kind"
WATERMARK_KIND = b"watermark"
RESIZE_KIND: Final = b"resize"
MIGRATION_KIND: Final = b"migration"
DONE_KIND: Final = b"migration-done"
FORWARD_KIND: Final = b"forward"
SEAL_KIND: Final = b"forward-seal"
CONTROL_KINDS: Final = frozenset({RESIZE_KIND, MIGRATION_KIND, DONE_KIND, FORWARD_KIND, SEAL_KIND})
"""The kinds of a live resize's records (docs/resize.md); `router.resize_wire` codes them."""

_EVENT_TIME_RANGE = f"[{MIN_EVENT_TIME_MS}, {MAX_EVENT_TIME_MS}]"
_BYTES: Final = (bytes, bytearray)
_BUFFERS: Final = (bytes, bytearray, memoryview)  # a tuple: `A | B` builds a union per call
_NO_KIND: Any = object()  # a `sessionizer-kind` header whose value is None is still a kind


def native_decoder() -> Any:
    """The native fast path of `decode_fragment` when this process runs compiled, else None."""
    module = compiled.native("_sessionizer_wire")
    if module is None:
        return None
    return module.WireDecoder(
        Fragment, KIND_HEADER, MIN_EVENT_TIME_MS, MAX_EVENT_TIME_MS, MAX_KEY_BYTES
    )


_FAST: Final = native_decoder()


class _Packers(threading.local):
    """One msgpack `Packer` per thread, for `encode_fragment`.

    `msgpack.packb` builds a `Packer` (and its 256 KiB buffer) per call: 1.08 against
    0.72 us per apache fragment reusing one (benchmarks/HOT_PATH.md, round 21).  Per
    thread, because a `Packer` is not safe to share: its buffer is the packing's state.
    It empties its buffer after each value, and after a value it could not pack.
    """

    def __init__(self) -> None:
        self.pack: Callable[[object], bytes] = msgpack.Packer(use_bin_type=True).pack


_PACKERS: Final = _Packers()


def encode_fragment(fragment: ParsedFragment) -> tuple[bytes, bytes]:
    """Return the (key, value) bytes of a fragment record.

    Raises `MalformedLine("unencodable")` for what a node would dead-letter: fields
    msgpack cannot carry (an integer beyond 64 bits, an unpaired surrogate...), a
    field name that is not a string, a key longer than `MAX_KEY_BYTES`; and
    `MalformedLine("bad-timestamp")` for an event time outside the accepted range.
    """
    if not MIN_EVENT_TIME_MS <= fragment.timestamp_ms <= MAX_EVENT_TIME_MS:
        raise MalformedLine(
            "bad-timestamp", f"event time {fragment.timestamp_ms} is outside {_EVENT_TIME_RANGE}"
        )
    bad_name = _first_non_str(fragment.fields)
    if bad_name is not None:
        raise MalformedLine("unencodable", f"field name {_show(bad_name[0])} is not a string")
    try:
        key = fragment.key.encode("utf-8")
        value = _PACKERS.pack(fragment.fields)
    except (OverflowError, TypeError, ValueError) as exc:
        raise MalformedLine("unencodable", f"{type(exc).__name__}: {exc}") from exc
    if len(key) > MAX_KEY_BYTES:
        raise MalformedLine(
            "unencodable", f"key is {len(key)} bytes in UTF-8, over {MAX_KEY_BYTES}"
        )
    return key, value


def encode_watermark(watermark: Watermark) -> tuple[bytes, list[tuple[str, bytes]]]:
    """Return the (value, headers) of a watermark record.

    Raises `InvalidArgument` (a `ValueError`) for a watermark a node would dead-letter (a
    time outside the event-time range, a non-boolean `end`): a producer bug, not bad input.
    """
    stamp = watermark.timestamp_ms
    if _event_time(stamp, allow_float=False) is None:
        raise InvalidArgument(
            f"watermark {_show(stamp)} is not an integer event time in {_EVENT_TIME_RANGE}"
        )
    if not isinstance(watermark.end, bool):
        raise InvalidArgument(f"watermark end must be a bool, got {_show(watermark.end)}")
    body: dict[str, object] = {"watermark": stamp, "end": watermark.end}
    problem = producer_problem(watermark.producer, watermark.marker)
    if problem is not None:
        raise InvalidArgument(problem)
    if watermark.producer is not None:
        body["producer"] = watermark.producer
    if watermark.marker is not None:
        body["marker"] = watermark.marker
    return msgpack.packb(body), [(KIND_HEADER, WATERMARK_KIND)]


def decode_record(
    key: bytes | None,
    value: bytes | None,
    headers: Iterable[tuple[str, bytes]] | None,
    timestamp_ms: int,
    *,
    offset: int | None = None,
) -> ParsedFragment | Watermark:
    """Decode one record, or raise `UndecodableRecord` (the caller dead-letters it)."""
    item = decode_parts(key, value, headers, timestamp_ms, offset=offset)
    if isinstance(item, Watermark):
        return item
    try:
        return ParsedFragment(*item)
    except ValueError as exc:  # `decode_parts` covers it today; kept if it grows new checks
        raise UndecodableRecord("bad-fragment", str(exc), offset=offset) from exc


def decode_fragment(
    key: bytes | None,
    value: bytes | None,
    headers: Iterable[tuple[str, bytes]] | None,
    timestamp_ms: int,
    offset: int,
) -> Fragment | Watermark:
    """Decode the record at `offset` into what the engine takes, or raise `UndecodableRecord`.

    The node's per-record path: the `Fragment` goes on to the engine as it is.
    """
    if _FAST is not None:
        fast = _FAST.decode(key, value, headers, timestamp_ms, offset)
        if fast is not None:
            return cast(Fragment, fast)
    item = _decode(key, value, headers, timestamp_ms, offset)
    if isinstance(item, Watermark):
        return item
    return Fragment(offset, item[0], timestamp_ms, item[1])


def decode_parts(
    key: bytes | None,
    value: bytes | None,
    headers: Iterable[tuple[str, bytes]] | None,
    timestamp_ms: int,
    *,
    offset: int | None = None,
) -> tuple[str, int, dict[str, Any]] | Watermark:
    """`decode_fragment` for a record whose offset may be unknown: a fragment as (key, event
    time, fields).  Callers that know the offset use `decode_fragment`."""
    item = _decode(key, value, headers, timestamp_ms, offset)
    if isinstance(item, Watermark):
        return item
    return item[0], timestamp_ms, item[1]


def _decode(
    key: bytes | None,
    value: bytes | None,
    headers: Iterable[tuple[str, bytes]] | None,
    timestamp_ms: int,
    offset: int | None,
) -> tuple[str, dict[str, Any]] | Watermark:
    """The checks of both decoders: a watermark, or a fragment's (key, fields)."""
    kind = _kind(headers, offset)
    if kind == WATERMARK_KIND:
        return _watermark(_unpack(value, offset), offset)
    if kind is not _NO_KIND:
        _fail("unknown-kind", _show(kind, 100), offset)
    text_key = _key(key, offset)
    # An exact int in range first: what every client gives for a good record, cheaper than
    # the general check (benchmarks/HOT_PATH.md, round 6).
    exact = type(timestamp_ms) is int and MIN_EVENT_TIME_MS <= timestamp_ms <= MAX_EVENT_TIME_MS
    if not exact and _event_time(timestamp_ms, allow_float=False) is None:
        _fail(
            "bad-timestamp",
            f"record timestamp {_show(timestamp_ms)} is outside {_EVENT_TIME_RANGE}",
            offset,
        )
    fields = _unpack(value, offset)
    if type(fields) is not dict:
        _fail("not-a-map", type(fields).__name__, offset)
    for name in fields:  # msgpack makes a text name an exact `str`
        if type(name) is not str:
            _fail("bad-field-name", f"field name {_show(name)} is not a string", offset)
    return text_key, fields


def _kind(headers: Any, offset: int | None) -> Any:
    """Return the value of the first `sessionizer-kind` header, or `_NO_KIND`."""
    if headers is None:
        return _NO_KIND
    try:
        for header in headers:
            name, content = header
            if isinstance(name, str) and name == KIND_HEADER:
                return content
    except (TypeError, ValueError) as exc:  # not iterable, or not (name, value) pairs
        _fail("bad-headers", f"{type(exc).__name__}: {_show(exc)}", offset)
    return _NO_KIND


def _key(key: Any, offset: int | None) -> str:
    """Return the session key of a fragment record: non-empty, bounded, UTF-8."""
    if type(key) is not bytes or not 0 < len(key) <= MAX_KEY_BYTES:  # a good key skips these
        if key is None:
            _fail("missing-key", "", offset)
        if not isinstance(key, _BYTES):
            # kafka-python always gives bytes; anything else is a caller's bug, dead-lettered.
            _fail("key-not-utf8", f"the key is a {type(key).__name__}, not bytes", offset)
        if not key:
            _fail("missing-key", "", offset)
        if len(key) > MAX_KEY_BYTES:
            _fail("key-too-long", f"{len(key)} bytes, over {MAX_KEY_BYTES}", offset)
    try:
        # bytes(...) only for a bytearray: it would copy the common bytes for nothing.
        return (key if type(key) is bytes else bytes(key)).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UndecodableRecord("key-not-utf8", repr(key[:100]), offset=offset) from exc


def _watermark(body: Any, offset: int | None) -> Watermark:
    """Validate a watermark record's body: `end`, when present, must be a real bool."""
    if not isinstance(body, dict):
        _fail("bad-watermark", f"expected a map, got {type(body).__name__}", offset)
    stamp = body.get("watermark")
    millis = _event_time(stamp, allow_float=True)
    if millis is None:
        _fail(
            "bad-watermark",
            f"watermark {_show(stamp)} is not an integer event time in {_EVENT_TIME_RANGE}",
            offset,
        )
    end = body.get("end", False)
    if not isinstance(end, bool):  # bool("no") is True: never guess end of input
        _fail("bad-watermark", f"end must be true or false, got {_show(end)}", offset)
    producer, marker = body.get("producer"), body.get("marker")
    if producer is None and marker is None:
        return Watermark(millis, end, offset)
    problem = producer_problem(producer, marker)
    if problem is not None:
        _fail("bad-watermark", problem, offset)
    return Watermark(millis, end, offset, producer, marker)


def producer_problem(producer: Any, marker: Any = None) -> str | None:
    """What is wrong with a watermark's producer id and marker, or None."""
    if producer is not None:
        if not isinstance(producer, str) or not producer:
            return f"producer must be a non-empty string, got {_show(producer)}"
        try:
            size = len(producer.encode("utf-8"))
        except UnicodeEncodeError:
            return f"producer id {_show(producer)} is not valid UTF-8"
        if size > MAX_PRODUCER_ID_BYTES:
            return f"producer id is {size} bytes in UTF-8, over {MAX_PRODUCER_ID_BYTES}"
    if marker is not None and marker not in MARKERS:
        return f"marker must be one of {', '.join(MARKERS)}, got {_show(marker)}"
    if marker is not None and producer is None:
        return f"a {marker!r} marker needs a producer"
    return None


def _event_time(value: Any, *, allow_float: bool) -> int | None:
    """Return `value` as epoch ms if it is an integral event time in range, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and allow_float:
        # Producers whose numbers are doubles (JavaScript) may send 1.7e12; anything not
        # exactly an integer would be rounded differently by each reader, so refuse it.
        if not math.isfinite(value) or not value.is_integer():
            return None
        value = int(value)
    if not isinstance(value, int) or not MIN_EVENT_TIME_MS <= value <= MAX_EVENT_TIME_MS:
        return None
    return int(value)


def _first_non_str(fields: dict[Any, Any]) -> tuple[Any] | None:
    """Return (name,) for the first field name that is not a string, or None."""
    for name in fields:
        if not isinstance(name, str):
            return (name,)
    return None


def _unpack(value: Any, offset: int | None) -> Any:
    """Return the msgpack value of a record's value bytes."""
    if value is None:
        _fail("missing-value", "", offset)
    if not isinstance(value, _BUFFERS):
        _fail("not-msgpack", f"the value is a {type(value).__name__}, not bytes", offset)
    try:
        # strict_map_key=False: nested maps may have integer (or other) keys.
        return msgpack.unpackb(value, raw=False, strict_map_key=False)
    except TypeError as exc:
        # A map keyed by an array or a map is valid msgpack that Python cannot hold.
        reason: UndecodableReason = "unhashable-key" if "unhashable" in str(exc) else "not-msgpack"
        raise UndecodableRecord(reason, str(exc)[:200], offset=offset) from exc
    except (ValueError, OverflowError, msgpack.UnpackException) as exc:
        # ValueError covers ExtraData, FormatError, StackError and invalid UTF-8 strings.
        raise UndecodableRecord("not-msgpack", str(exc)[:200], offset=offset) from exc


def _fail(reason: UndecodableReason, detail: str, offset: int | None) -> NoReturn:
    """Raise `UndecodableRecord` (a function, so that type checkers see the branch end)."""
    raise UndecodableRecord(reason, detail, offset=offset)


def _show(value: object, limit: int = 200) -> str:
    """Return a bounded repr that cannot raise (huge ints, hostile `__repr__`)."""
    try:
        return repr(value)[:limit]
    except Exception:  # a dead-letter detail must never be the thing that crashes
        return f"<{type(value).__name__}>"
