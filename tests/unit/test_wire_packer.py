"""`encode_fragment` packs with a `Packer` kept per thread: the same bytes as `msgpack.packb`.

The packer is reused (benchmarks/HOT_PATH.md, round 21), so what these hold is that
reuse changes nothing: every value packs to `packb`'s bytes, a value that cannot be
packed leaves nothing behind for the next one, and a thread that packs while another
thread's packing is halfway through gets its own bytes, as does the other thread.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from router.errors import MalformedLine
from router.fragment import ParsedFragment
from router.wire import encode_fragment

_WAIT_S = 30.0

scalars = st.one_of(
    st.none(),
    st.booleans(),
    # Beyond 64 bits: msgpack refuses these, and `encode_fragment` says "unencodable".
    st.integers(-(2**66), 2**66),
    st.floats(allow_nan=False),
    # Unpaired surrogates included: refused too.
    st.text(st.characters(codec=None), max_size=12),
    st.binary(max_size=12),
)
field_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)
field_maps = st.dictionaries(st.text(max_size=8), field_values, max_size=6)


def packb_or_none(fields: dict[str, Any]) -> bytes | None:
    """What `msgpack.packb` makes of the fields, or None where it refuses them."""
    try:
        packed: bytes = msgpack.packb(fields, use_bin_type=True)
    except (OverflowError, TypeError, ValueError):
        return None
    return packed


@settings(max_examples=300, deadline=None)
@given(field_sets=st.lists(field_maps, min_size=1, max_size=6))
def test_each_fragment_packs_as_packb_does_also_after_one_it_refused(
    field_sets: list[dict[str, Any]],
) -> None:
    for fields in field_sets:
        expected = packb_or_none(fields)
        fragment = ParsedFragment("k", 1_700_000_000_000, fields)
        if expected is None:
            with pytest.raises(MalformedLine) as refused:
                encode_fragment(fragment)
            assert refused.value.reason == "unencodable"
        else:
            assert encode_fragment(fragment) == (b"k", expected)


class _Pausing(dict[str, Any]):
    """A map that stops the packing of its owner halfway until `resume` is set.

    msgpack packs a dict subclass through its `items()`, Python code, so the packing
    thread really is inside `Packer.pack` while it waits.
    """

    def __init__(self, inside: threading.Event, resume: threading.Event) -> None:
        super().__init__(inner=1)
        self._inside, self._resume = inside, resume

    def items(self) -> Iterator[tuple[str, Any]]:  # type: ignore[override]
        self._inside.set()
        if not self._resume.wait(_WAIT_S):
            raise AssertionError("the other thread never finished its packing")
        return iter(list(super().items()))


def test_a_thread_packing_while_another_is_halfway_gets_its_own_bytes() -> None:
    inside, resume = threading.Event(), threading.Event()
    paused_fields = {"first": "a" * 40, "map": _Pausing(inside, resume), "last": 7}
    other_fields = {"path": "/other", "status": 404}
    results: dict[str, Any] = {}

    def paused() -> None:
        try:
            results["paused"] = encode_fragment(ParsedFragment("p", 1, paused_fields))
        except BaseException as exc:  # reported by the assertion below
            results["paused"] = exc

    thread = threading.Thread(target=paused)
    thread.start()
    try:
        assert inside.wait(_WAIT_S), "the first packing never reached its pausing map"
        results["other"] = encode_fragment(ParsedFragment("o", 1, other_fields))
    finally:
        resume.set()
        thread.join(_WAIT_S)
    assert not thread.is_alive()
    plain = {"first": "a" * 40, "map": {"inner": 1}, "last": 7}
    assert results["other"] == (b"o", msgpack.packb(other_fields, use_bin_type=True))
    assert results["paused"] == (b"p", msgpack.packb(plain, use_bin_type=True))
