"""`framework.kernel.safe_json.loads_object`: the bounded, total JSON decoder of znode data."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from framework.kernel.safe_json import MAX_JSON_DEPTH, loads_object

_ODD_NUMBERS = ["Infinity", "-Infinity", "NaN", "1e999", "-1e999", "9" * 5000]


def test_the_safe_decoder_bounds_depth_numbers_and_strings() -> None:
    assert loads_object(b'{"a": ' + b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH + b"}") is None
    deep = MAX_JSON_DEPTH - 1
    assert loads_object(b'{"a": ' + b"[" * deep + b"]" * deep + b"}") is not None
    assert loads_object(b'{"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}') is not None
    for number in _ODD_NUMBERS[:6]:
        assert loads_object(f'{{"a": {number}}}'.encode()) is None, number
    assert loads_object(b'{"a": 9223372036854775807}') == {"a": 2**63 - 1}
    assert loads_object(b'{"a": 9223372036854775808}') is None
    assert loads_object(b'{"a": "\\ud800"}') is None  # a lone surrogate: not UTF-8
    assert loads_object(b"[1]") is None and loads_object(b"\xff") is None


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300) | st.text(max_size=100).map(str.encode))
def test_any_bytes_are_an_object_or_none(data: bytes) -> None:
    value = loads_object(data)
    assert value is None or isinstance(value, dict)


_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.text(max_size=5)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=5), _VALUES, max_size=4))
def test_every_json_object_within_bounds_reads_back(value: dict[str, object]) -> None:
    try:
        json.dumps(value).encode("utf-8")
    except UnicodeEncodeError:
        return
    assert loads_object(json.dumps(value).encode()) == value
