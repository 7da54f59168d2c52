"""How fragments and watermarks are laid out in Kafka records (a cross-language contract).

- Fragment: key = the session key in UTF-8, value = msgpack map of the fields,
  timestamp = event time in epoch milliseconds, no headers.
- Watermark: key = none, header `sessionizer-kind: watermark`, value = msgpack
  `{"watermark": <epoch ms>, "end": <bool>}`, timestamp = the watermark.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from router.errors import MalformedLine, UndecodableRecord
from router.fragment import ParsedFragment

__all__ = [
    "KIND_HEADER",
    "WATERMARK_KIND",
    "Watermark",
    "decode_record",
    "encode_fragment",
    "encode_watermark",
]

KIND_HEADER = "sessionizer-kind"
WATERMARK_KIND = b"watermark"


@dataclass(frozen=True, slots=True)
class Watermark:
    """An in-band watermark: stream time is at least `timestamp_ms`; `end` marks end of input."""

    timestamp_ms: int
    end: bool = False


def encode_fragment(fragment: ParsedFragment) -> tuple[bytes, bytes]:
    """Return the (key, value) bytes of a fragment record.

    Raises `MalformedLine("unencodable")` for fields msgpack cannot carry (an
    integer beyond 64 bits, an unpaired surrogate, a non-string map key...).
    """
    try:
        key = fragment.key.encode("utf-8")
        value = msgpack.packb(fragment.fields, use_bin_type=True)
    except (OverflowError, TypeError, ValueError) as exc:
        raise MalformedLine("unencodable", f"{type(exc).__name__}: {exc}") from exc
    return key, value


def encode_watermark(watermark: Watermark) -> tuple[bytes, list[tuple[str, bytes]]]:
    """Return the (value, headers) of a watermark record."""
    value = msgpack.packb({"watermark": watermark.timestamp_ms, "end": watermark.end})
    return value, [(KIND_HEADER, WATERMARK_KIND)]


def decode_record(
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes]] | None,
    timestamp_ms: int,
    *,
    offset: int | None = None,
) -> ParsedFragment | Watermark:
    """Decode one record, or raise `UndecodableRecord` (the caller dead-letters it)."""
    kind = next((v for k, v in headers or () if k == KIND_HEADER), None)
    if kind == WATERMARK_KIND:
        body = _unpack(value, offset)
        try:
            return Watermark(int(body["watermark"]), bool(body.get("end", False)))
        except (KeyError, TypeError, ValueError) as exc:
            raise UndecodableRecord("bad-watermark", repr(body)[:200], offset=offset) from exc
    if kind is not None:
        raise UndecodableRecord("unknown-kind", repr(kind)[:100], offset=offset)
    if not key:
        raise UndecodableRecord("missing-key", offset=offset)
    try:
        text_key = key.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UndecodableRecord("key-not-utf8", repr(key[:100]), offset=offset) from exc
    fields = _unpack(value, offset)
    if not isinstance(fields, dict):
        raise UndecodableRecord("not-a-map", type(fields).__name__, offset=offset)
    try:
        return ParsedFragment(text_key, timestamp_ms, fields)
    except ValueError as exc:
        raise UndecodableRecord("bad-fragment", str(exc), offset=offset) from exc


def _unpack(value: bytes | None, offset: int | None) -> Any:
    if value is None:
        raise UndecodableRecord("missing-value", offset=offset)
    try:
        return msgpack.unpackb(value, raw=False, strict_map_key=False)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise UndecodableRecord("not-msgpack", str(exc)[:200], offset=offset) from exc
