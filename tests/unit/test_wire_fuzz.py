"""Fuzzing `decode_record`: for any key, value, headers and timestamp it decodes or dead-letters.

The property every test checks: `decode_record` returns a valid `ParsedFragment` or
`Watermark`, or raises `UndecodableRecord`; no other exception escapes, whatever
the bytes, the msgpack values (maps keyed by arrays or maps included) or the headers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework.kernel.limits import MAX_EVENT_TIME_MS, MAX_KEY_BYTES, MIN_EVENT_TIME_MS
from framework.kernel.watermark import Watermark
from router.errors import UndecodableRecord
from router.fragment import ParsedFragment
from router.wire import (
    KIND_HEADER,
    WATERMARK_KIND,
    decode_record,
    encode_fragment,
    encode_watermark,
)

FUZZ = settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
WATERMARK_HEADERS = [(KIND_HEADER, WATERMARK_KIND)]


def decodes_or_dead_letters(key: Any, value: Any, headers: Any, timestamp_ms: Any) -> None:
    """Assert the property: a valid result or `UndecodableRecord`, nothing else."""
    try:
        result = decode_record(key, value, headers, timestamp_ms, offset=7)
    except UndecodableRecord as exc:
        assert exc.reason and exc.reason == exc.reason.lower()
        assert "offset 7" in str(exc)
        return
    if isinstance(result, Watermark):
        assert type(result.timestamp_ms) is int
        assert MIN_EVENT_TIME_MS <= result.timestamp_ms <= MAX_EVENT_TIME_MS
        assert type(result.end) is bool
    else:
        assert isinstance(result, ParsedFragment)
        assert 0 < len(result.key.encode("utf-8")) <= MAX_KEY_BYTES
        assert MIN_EVENT_TIME_MS <= result.timestamp_ms <= MAX_EVENT_TIME_MS
        assert isinstance(result.fields, dict)
        assert all(isinstance(name, str) for name in result.fields)


@dataclass(frozen=True)
class Map:
    """A msgpack map as a list of pairs, so that its keys may be arrays or maps."""

    pairs: tuple[tuple[Any, Any], ...]


@dataclass(frozen=True)
class Raw:
    """Bytes written into the packed value as they are (what `msgpack.ExtType` refuses)."""

    data: bytes


def pack(value: Any) -> bytes:
    """Pack a tree of scalars, lists and `Map`s as msgpack (keys of any type)."""
    packer = msgpack.Packer(use_bin_type=True)
    out: list[bytes] = []

    def walk(item: Any) -> None:
        if isinstance(item, Map):
            out.append(packer.pack_map_header(len(item.pairs)))
            for key, inner in item.pairs:
                walk(key)
                walk(inner)
        elif isinstance(item, list):
            out.append(packer.pack_array_header(len(item)))
            for inner in item:
                walk(inner)
        elif isinstance(item, Raw):
            out.append(item.data)
        else:
            out.append(packer.pack(item))

    walk(value)
    return b"".join(out)


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=10),
    st.binary(max_size=10),
    st.builds(msgpack.ExtType, st.sampled_from([0, 5, 127]), st.binary(max_size=13)),
    # Type -1 is msgpack's timestamp: fixext 1/4/8 and ext8 of 12 bytes, valid or not.
    st.builds(
        lambda header, data: Raw(header + data),
        st.sampled_from([b"\xd4\xff", b"\xd6\xff", b"\xd7\xff"]),
        st.binary(min_size=8, max_size=8),
    ).map(lambda raw: Raw(raw.data[: {0xD4: 3, 0xD6: 6, 0xD7: 10}[raw.data[0]]])),
    st.binary(min_size=12, max_size=12).map(lambda data: Raw(b"\xc7\x0c\xff" + data)),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(st.tuples(inner, inner), max_size=4).map(lambda pairs: Map(tuple(pairs))),
    ),
    max_leaves=20,
)
event_times = st.one_of(
    st.integers(MIN_EVENT_TIME_MS, MAX_EVENT_TIME_MS),
    st.integers(),
    st.sampled_from([-1, MAX_EVENT_TIME_MS + 1, 2**63 - 1, 2**63, 2**64]),
)
header_values = st.one_of(
    st.sampled_from([WATERMARK_KIND, b"checkpoint", b"", "watermark"]),
    st.binary(max_size=10),
    st.text(max_size=10),
    st.integers(),
    st.none(),
)
header_names = st.one_of(st.sampled_from([KIND_HEADER, "traceparent", ""]), st.text(max_size=10))
headers = st.one_of(
    st.none(),
    st.lists(
        st.one_of(
            st.tuples(header_names, header_values),
            st.tuples(header_names, header_values, header_values),
            st.tuples(),
            st.tuples(header_names),
            header_values,
        ),
        max_size=4,
    ),
    header_values,
)


@FUZZ
@given(
    key=st.one_of(st.none(), st.binary(max_size=20), st.binary(min_size=4090, max_size=4100)),
    value=st.one_of(st.none(), st.binary(max_size=60)),
    headers=headers,
    timestamp_ms=event_times,
)
def test_arbitrary_records_decode_or_dead_letter(
    key: bytes | None, value: bytes | None, headers: Any, timestamp_ms: int
) -> None:
    decodes_or_dead_letters(key, value, headers, timestamp_ms)


fragment_values = st.one_of(
    values,
    st.lists(st.tuples(st.text(max_size=6), values), max_size=5).map(
        lambda pairs: Map(tuple(pairs))
    ),
)


@FUZZ
@given(value=fragment_values, timestamp_ms=event_times)
def test_any_msgpack_value_as_a_fragment_decodes_or_dead_letters(
    value: Any, timestamp_ms: int
) -> None:
    decodes_or_dead_letters(b"session-1", pack(value), [], timestamp_ms)


watermark_bodies = st.one_of(
    values,
    st.builds(
        lambda stamp, end, extra: Map((("watermark", stamp), *end, *extra)),
        st.one_of(
            values,
            event_times.filter(lambda stamp: -(2**63) <= stamp < 2**64),  # msgpack's ints
            st.floats(),
            st.integers(MIN_EVENT_TIME_MS, MAX_EVENT_TIME_MS).map(float),
        ),
        st.one_of(st.just(()), st.tuples(st.tuples(st.just("end"), values))),
        st.lists(st.tuples(values, values), max_size=2),
    ),
)


@FUZZ
@given(value=watermark_bodies, key=st.one_of(st.none(), st.binary(max_size=5)))
def test_any_msgpack_value_as_a_watermark_decodes_or_dead_letters(
    value: Any, key: bytes | None
) -> None:
    decodes_or_dead_letters(key, pack(value), WATERMARK_HEADERS, 0)


json_like = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**63), 2**64 - 1),
        st.floats(),
        st.text(max_size=8),
        st.binary(max_size=8),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=12,
)
fragments = st.builds(
    ParsedFragment,
    st.text(min_size=1, max_size=20),
    st.integers(MIN_EVENT_TIME_MS, MAX_EVENT_TIME_MS),
    st.dictionaries(st.text(max_size=8), json_like, max_size=5),
)


def corrupt(data: bytes, position: int, byte: int) -> bytes:
    """Replace the byte at `position` (modulo the length) with `byte`."""
    position %= len(data)
    return data[:position] + bytes([byte]) + data[position + 1 :]


@FUZZ
@given(
    fragment=fragments,
    position=st.integers(0, 10_000),
    byte=st.integers(0, 255),
    in_key=st.booleans(),
)
def test_a_single_byte_corruption_of_a_fragment_decodes_or_dead_letters(
    fragment: ParsedFragment, position: int, byte: int, in_key: bool
) -> None:
    key, value = encode_fragment(fragment)
    if in_key:
        key = corrupt(key, position, byte)
    else:
        value = corrupt(value, position, byte)
    decodes_or_dead_letters(key, value, [], fragment.timestamp_ms)


@FUZZ
@given(
    stamp=st.integers(MIN_EVENT_TIME_MS, MAX_EVENT_TIME_MS),
    end=st.booleans(),
    position=st.integers(0, 100),
    byte=st.integers(0, 255),
)
def test_a_single_byte_corruption_of_a_watermark_decodes_or_dead_letters(
    stamp: int, end: bool, position: int, byte: int
) -> None:
    value, record_headers = encode_watermark(Watermark(stamp, end))
    decodes_or_dead_letters(None, corrupt(value, position, byte), record_headers, stamp)


@FUZZ
@given(fragment=fragments)
def test_every_valid_fragment_round_trips(fragment: ParsedFragment) -> None:
    key, value = encode_fragment(fragment)
    decoded = decode_record(key, value, [], fragment.timestamp_ms)
    # NaN != NaN: compare the re-encoded bytes instead of the values.
    assert isinstance(decoded, ParsedFragment)
    assert encode_fragment(decoded) == (key, value)
