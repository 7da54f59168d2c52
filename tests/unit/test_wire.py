"""The Kafka record layout of fragments and watermarks, and every way decoding can fail."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from router.errors import MalformedLine, UndecodableRecord
from router.fragment import ParsedFragment
from router.wire import (
    KIND_HEADER,
    Watermark,
    decode_record,
    encode_fragment,
    encode_watermark,
)

fields = st.dictionaries(
    st.text(max_size=8), st.one_of(st.integers(-(2**63), 2**64 - 1), st.text(max_size=20))
)


@given(key=st.text(min_size=1, max_size=30), ts=st.integers(0, 2**62), body=fields)
def test_a_fragment_round_trips(key: str, ts: int, body: dict) -> None:
    fragment = ParsedFragment(key, ts, body)
    raw_key, value = encode_fragment(fragment)
    assert raw_key == key.encode()
    assert decode_record(raw_key, value, [], ts) == fragment


@pytest.mark.parametrize("end", [False, True])
def test_a_watermark_round_trips(end: bool) -> None:
    value, headers = encode_watermark(Watermark(1234, end))
    assert headers == [(KIND_HEADER, b"watermark")]
    assert decode_record(None, value, headers, 1234) == Watermark(1234, end)


@pytest.mark.parametrize(
    ("key", "value", "headers", "reason"),
    [
        (b"k", b"\xc1", [], "not-msgpack"),
        (b"k", None, [], "missing-value"),
        (None, msgpack.packb({}), [], "missing-key"),
        (b"\xff\xfe", msgpack.packb({}), [], "key-not-utf8"),
        (b"k", msgpack.packb([1, 2]), [], "not-a-map"),
        (None, msgpack.packb({"nope": 1}), [(KIND_HEADER, b"watermark")], "bad-watermark"),
        (None, b"", [(KIND_HEADER, b"checkpoint")], "unknown-kind"),
    ],
)
def test_undecodable_records_say_why_and_where(
    key: bytes | None, value: bytes | None, headers: list, reason: str
) -> None:
    with pytest.raises(UndecodableRecord) as raised:
        decode_record(key, value, headers, 5, offset=42)
    assert raised.value.reason == reason
    assert "offset 42" in str(raised.value)


def test_a_negative_timestamp_is_undecodable_not_a_crash() -> None:
    key, value = encode_fragment(ParsedFragment("k", 1, {}))
    with pytest.raises(UndecodableRecord, match="bad-fragment"):
        decode_record(key, value, [], -1)


@pytest.mark.parametrize("value", [2**64, -(2**63) - 1, "\ud800", {1: 2}.keys()])
def test_a_fragment_msgpack_cannot_carry_is_malformed_not_a_crash(value: object) -> None:
    with pytest.raises(MalformedLine) as raised:
        encode_fragment(ParsedFragment("k", 1, {"field": value}))
    assert raised.value.reason == "unencodable"
