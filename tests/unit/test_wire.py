"""The Kafka record layout of fragments and watermarks, and every way decoding can fail."""

from __future__ import annotations

import contextlib

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework.kernel.limits import MAX_EVENT_TIME_MS, MAX_KEY_BYTES, MIN_EVENT_TIME_MS
from framework.kernel.watermark import Watermark
from router.errors import MalformedLine, UndecodableRecord
from router.fragment import ParsedFragment
from router.wire import KIND_HEADER, decode_record, encode_fragment, encode_watermark

fields = st.dictionaries(
    st.text(max_size=8), st.one_of(st.integers(-(2**63), 2**64 - 1), st.text(max_size=20))
)


@given(
    key=st.text(min_size=1, max_size=30),
    ts=st.integers(MIN_EVENT_TIME_MS, MAX_EVENT_TIME_MS),
    body=fields,
)
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


@pytest.mark.parametrize("value", [2**64, -(2**63) - 1, "\ud800", {1: 2}.keys()])
def test_a_fragment_msgpack_cannot_carry_is_malformed_not_a_crash(value: object) -> None:
    with pytest.raises(MalformedLine) as raised:
        encode_fragment(ParsedFragment("k", 1, {"field": value}))
    assert raised.value.reason == "unencodable"


# --- issue 12: decoding is total (reproductions first) ---


def _watermark_record(body: object) -> tuple[None, bytes, list[tuple[str, bytes]]]:
    return None, msgpack.packb(body), [(KIND_HEADER, b"watermark")]


@pytest.mark.parametrize(
    "body",
    [
        {"watermark": float("inf")},
        {"watermark": float("-inf")},
        {"watermark": float("nan")},
        {"watermark": 1e300},
        {"watermark": 1.5},
        {"watermark": -1},
        {"watermark": 253_402_300_800_000},
        {"watermark": True},
        {"watermark": "5"},
        {"watermark": 5, "end": "no"},
        {"watermark": 5, "end": 1},
        {"watermark": 5, "end": None},
        [5],
        5,
    ],
)
def test_a_bad_watermark_is_undecodable_not_a_crash(body: object) -> None:
    with pytest.raises(UndecodableRecord) as raised:
        decode_record(*_watermark_record(body), 5)
    assert raised.value.reason == "bad-watermark"


def test_an_integral_float_watermark_is_accepted() -> None:
    assert decode_record(*_watermark_record({"watermark": 1234.0}), 5) == Watermark(1234)


@pytest.mark.parametrize(
    "value",
    [
        b"\x81\x91\x01\x01",  # {[1]: 1}
        b"\x81\x80\x01",  # {{}: 1}
        b"\x81\xa1a\x81\x91\x01\x01",  # {"a": {[1]: 1}}: nested
    ],
)
def test_a_map_with_an_unhashable_key_is_undecodable_not_a_crash(value: bytes) -> None:
    with pytest.raises(UndecodableRecord) as raised:
        decode_record(b"k", value, [], 5)
    assert raised.value.reason == "unhashable-key"
    with pytest.raises(UndecodableRecord) as raised:
        decode_record(None, value, [(KIND_HEADER, b"watermark")], 5)
    assert raised.value.reason == "unhashable-key"


def _fragment_record() -> tuple[bytes, bytes]:
    return encode_fragment(
        ParsedFragment(
            "83.149.9.216|Mozilla/5.0",
            1_431_857_103_000,
            {"ip": "83.149.9.216", "status": 200, "bytes": 2326, "nested": {"a": [1, 2.5]}},
        )
    )


def test_every_single_byte_corruption_of_a_fragment_decodes_or_is_undecodable() -> None:
    key, value = _fragment_record()
    for position in range(len(value)):
        for byte in range(256):
            corrupt = value[:position] + bytes([byte]) + value[position + 1 :]
            with contextlib.suppress(UndecodableRecord):
                decode_record(key, corrupt, [], 1_431_857_103_000)


def test_every_single_byte_corruption_of_a_watermark_decodes_or_is_undecodable() -> None:
    value, headers = encode_watermark(Watermark(1_431_857_103_000, True))
    for position in range(len(value)):
        for byte in range(256):
            corrupt = value[:position] + bytes([byte]) + value[position + 1 :]
            with contextlib.suppress(UndecodableRecord):
                decode_record(None, corrupt, headers, 1_431_857_103_000)


@pytest.mark.parametrize("timestamp", [-1, -(2**63), 253_402_300_800_000, 2**63 - 1, 2**64])
def test_a_record_timestamp_outside_the_event_time_range_is_undecodable(timestamp: int) -> None:
    key, value = _fragment_record()
    with pytest.raises(UndecodableRecord) as raised:
        decode_record(key, value, [], timestamp)
    assert raised.value.reason == "bad-timestamp"


@pytest.mark.parametrize(
    ("key", "value", "headers", "timestamp", "reason"),
    [
        (b"k" * (MAX_KEY_BYTES + 1), msgpack.packb({}), [], 5, "key-too-long"),
        (b"k", msgpack.packb({1: "x"}), [], 5, "bad-field-name"),
        (b"k", msgpack.packb({b"raw": "x"}), [], 5, "bad-field-name"),
        (b"k", msgpack.packb({}), 5, 5, "bad-headers"),
        (b"k", msgpack.packb({}), [("a", b"1", "extra")], 5, "bad-headers"),
        (b"k", msgpack.packb({}), [None], 5, "bad-headers"),
        (b"k", msgpack.packb({}), [(KIND_HEADER, "watermark")], 5, "unknown-kind"),
        (b"k", msgpack.packb({}), [(KIND_HEADER, None)], 5, "unknown-kind"),
        ("k", msgpack.packb({}), [], 5, "key-not-utf8"),
        (b"", msgpack.packb({}), [], 5, "missing-key"),
        (b"k", "{}", [], 5, "not-msgpack"),
        (b"k", msgpack.packb({}), [], 5.0, "bad-timestamp"),
        (b"k", msgpack.packb({}), [], True, "bad-timestamp"),
        (b"k", msgpack.packb({}), [], None, "bad-timestamp"),
        # Around the exact-type fast paths of `_decode` and `_key`:
        (bytearray(b"k" * (MAX_KEY_BYTES + 1)), msgpack.packb({}), [], 5, "key-too-long"),
        (b"\xff" * MAX_KEY_BYTES, msgpack.packb({}), [], 5, "key-not-utf8"),
        (bytearray(b"\xff"), msgpack.packb({}), [], 5, "key-not-utf8"),
        (bytearray(), msgpack.packb({}), [], 5, "missing-key"),
        (b"k", msgpack.packb({}), [], MIN_EVENT_TIME_MS - 1, "bad-timestamp"),
        (b"k", msgpack.packb({"a": 1, "b": 2, 3: "x"}), [], 5, "bad-field-name"),
        (b"k", msgpack.packb([("a", 1)]), [], 5, "not-a-map"),
    ],
)
def test_garbage_of_every_kind_has_a_reason(
    key: object, value: object, headers: object, timestamp: object, reason: str
) -> None:
    with pytest.raises(UndecodableRecord) as raised:
        decode_record(key, value, headers, timestamp)  # type: ignore[arg-type]
    assert raised.value.reason == reason


class _Millis(int):
    """An int subclass, as a client might hand a timestamp."""


def test_keys_and_timestamps_of_other_accepted_types_decode_as_exact_ones() -> None:
    value = msgpack.packb({"a": 1})
    exact = decode_record(b"k" * MAX_KEY_BYTES, value, None, MAX_EVENT_TIME_MS)
    assert decode_record(bytearray(b"k" * MAX_KEY_BYTES), value, None, MAX_EVENT_TIME_MS) == exact
    assert decode_record(b"k" * MAX_KEY_BYTES, value, None, _Millis(MAX_EVENT_TIME_MS)) == exact
    assert decode_record(b"k", memoryview(value), None, 5) == decode_record(b"k", value, None, 5)


def test_other_headers_and_nested_keys_of_any_hashable_type_are_fine() -> None:
    value = msgpack.packb({"a": {1: [b"x", None], 2.5: {"b": True}}})
    headers = [("traceparent", b"00-abc"), ("n", None), ("m", 5)]
    fragment = decode_record(b"k", value, headers, MAX_EVENT_TIME_MS)
    assert fragment == ParsedFragment(
        "k", MAX_EVENT_TIME_MS, msgpack.unpackb(value, strict_map_key=False)
    )


def test_a_watermark_without_end_is_not_the_end() -> None:
    assert decode_record(*_watermark_record({"watermark": 0}), 5) == Watermark(0, False)


@pytest.mark.parametrize(
    "watermark",
    [
        Watermark(-1),
        Watermark(MAX_EVENT_TIME_MS + 1),
        Watermark(2**64),
        Watermark(1.0),  # type: ignore[arg-type]
        Watermark(True),
        Watermark(5, "no"),  # type: ignore[arg-type]
    ],
)
def test_a_producer_never_writes_a_watermark_a_node_would_reject(watermark: Watermark) -> None:
    with pytest.raises(ValueError, match="watermark"):
        encode_watermark(watermark)


@pytest.mark.parametrize(
    ("fragment", "reason"),
    [
        (ParsedFragment("k", MAX_EVENT_TIME_MS + 1, {}), "bad-timestamp"),
        (ParsedFragment("k" * (MAX_KEY_BYTES + 1), 5, {}), "unencodable"),
        (ParsedFragment("k", 5, {1: "x"}), "unencodable"),  # type: ignore[dict-item]
    ],
)
def test_a_producer_never_writes_a_fragment_a_node_would_reject(
    fragment: ParsedFragment, reason: str
) -> None:
    with pytest.raises(MalformedLine) as raised:
        encode_fragment(fragment)
    assert raised.value.reason == reason


def test_the_longest_key_and_the_range_ends_are_accepted() -> None:
    for ts in (MIN_EVENT_TIME_MS, MAX_EVENT_TIME_MS):
        fragment = ParsedFragment("é" * (MAX_KEY_BYTES // 2), ts, {})
        assert decode_record(*encode_fragment(fragment), [], ts) == fragment
        value, headers = encode_watermark(Watermark(ts, True))
        assert decode_record(None, value, headers, ts) == Watermark(ts, True)
