"""The records of a live resize (docs/resize.md, "Record formats"): round trips and totality."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.kernel.errors import InvalidArgument
from framework.kernel.watermark import Watermark
from router.errors import UndecodableRecord
from router.resize_wire import (
    Control,
    Epoch,
    Forward,
    ForwardEnd,
    ForwardSeal,
    MigrationDone,
    MigrationPart,
    ResizeMarker,
    decode_control,
    encode_control,
)
from router.wire import CONTROL_KINDS, KIND_HEADER, decode_fragment, encode_watermark

EPOCH = Epoch(3, 8, 12)
HEAD = (1_000, 2, 1_500, False, 10, 14, msgpack.packb({"n": 2}), None)
SAMPLES: list[Control] = [
    ResizeMarker(EPOCH, None, 0),
    ResizeMarker(EPOCH, "web-1", 1_700_000_000_000),
    MigrationPart(EPOCH, "app.stream.0003", 40, "user", 10, 0, 3, HEAD, 1_000),
    MigrationPart(EPOCH, "app.stream.0003", 40, "user", 10, 1, 3, (1_600, 15, False, {"a": 1}), 9),
    MigrationDone(EPOCH, "app.stream.0003", 40, 7, 1_400),
    MigrationDone(EPOCH, "app.stream.0003", 40, 0, 1_400, ended=True),
    Forward(EPOCH, "app.stream.0003", 41, 30, "user", {"page": "/"}, 1_800),
    ForwardEnd(EPOCH, "app.stream.0003", 44, 30, 1_900),
    ForwardSeal(EPOCH, "app.stream.0003", 45, 1_900),
]


@pytest.mark.parametrize("record", SAMPLES, ids=lambda r: type(r).__name__)
def test_every_kind_decodes_to_what_was_encoded_with_the_same_bytes_each_time(
    record: Control,
) -> None:
    key, value, headers, stamp = encode_control(record)
    assert encode_control(record) == (key, value, headers, stamp)
    decoded = decode_control(key, value, headers, stamp, 77)
    assert decoded == record
    assert decoded is not None and decoded.offset == 77
    assert headers[0][0] == KIND_HEADER and headers[0][1] in CONTROL_KINDS


@pytest.mark.parametrize("record", SAMPLES, ids=lambda r: type(r).__name__)
def test_the_fragment_decoder_dead_letters_them_as_an_unknown_kind(record: Control) -> None:
    key, value, headers, stamp = encode_control(record)
    with pytest.raises(UndecodableRecord) as refused:
        decode_fragment(key, value, headers, stamp, 5)
    assert refused.value.reason == "unknown-kind"


def test_records_of_no_resize_kind_are_not_resize_records() -> None:
    value, headers = encode_watermark(Watermark(5))
    assert decode_control(None, value, headers, 5, 0) is None
    assert decode_control(b"k", msgpack.packb({"a": 1}), None, 5, 0) is None
    assert decode_control(b"k", b"", [("x", b"y")], 5, 0) is None


@pytest.mark.parametrize(
    ("old", "new", "sources", "targets"),
    [(8, 12, range(8), range(8, 12)), (12, 8, range(8, 12), range(8))],
)
def test_an_epoch_names_its_sources_and_targets(
    old: int, new: int, sources: range, targets: range
) -> None:
    epoch = Epoch(1, old, new)
    assert epoch.sources() == sources and epoch.targets() == targets
    for index in range(max(old, new)):
        assert epoch.is_source(index) == (index in sources)
        assert epoch.is_target(index) == (index in targets)


@pytest.mark.parametrize(("epoch", "old", "new"), [(0, 1, 2), (1, 0, 2), (1, 3, 3)])
def test_an_epoch_that_is_no_resize_is_refused(epoch: int, old: int, new: int) -> None:
    with pytest.raises(InvalidArgument):
        Epoch(epoch, old, new)


FIELDS = [
    *("epoch", "from", "to", "producer", "source", "barrier", "session", "part", "parts"),
    *("body", "sessions", "offset", "committed", "fields", "end", "ended"),
]
_ANY = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=8) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=20,
)


@settings(max_examples=100, deadline=None)
@given(
    kind=st.sampled_from(sorted(CONTROL_KINDS)),
    body=st.dictionaries(
        st.sampled_from(FIELDS),
        _ANY,
    ),
    key=st.none() | st.binary(max_size=8),
    stamp=st.integers(-5, 2**64),
)
def test_any_value_of_a_resize_kind_decodes_or_is_refused_as_an_unknown_kind(
    kind: bytes, body: dict[str, object], key: bytes | None, stamp: int
) -> None:
    value = msgpack.packb(body, use_bin_type=True)
    try:
        decode_control(key, value, [(KIND_HEADER, kind)], stamp, 0)
    except UndecodableRecord as exc:
        assert exc.reason == "unknown-kind"


@settings(max_examples=150, deadline=None)
@given(value=st.binary(max_size=40), kind=st.sampled_from(sorted(CONTROL_KINDS)))
def test_any_bytes_of_a_resize_kind_decode_or_are_refused(value: bytes, kind: bytes) -> None:
    try:
        decode_control(b"k", value, [(KIND_HEADER, kind)], 0, 0)
    except UndecodableRecord as exc:
        assert exc.reason == "unknown-kind"
