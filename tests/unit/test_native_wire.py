"""The native wire decoder (router/native) against the reference, `router.wire`'s Python decoder.

The property: for any key, value, headers and timestamp, the native `WireDecoder`
either gives the record back (None: the reference decides, dead letters included) or
returns exactly the `Fragment` the reference makes: the same key, timestamp and
fields, of the same types, in the same order.  And it gives back no record of the
shapes a node reads all day (the real logs' records): those are its reason to exist.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import json
import math
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework.kernel import compiled
from framework.kernel.fragment import Fragment
from framework.kernel.limits import MAX_EVENT_TIME_MS, MAX_KEY_BYTES, MIN_EVENT_TIME_MS
from framework.testing.hot_path_runs import load_native, printed_on
from router import wire
from router.errors import MalformedLine, UndecodableRecord
from router.formats_apache import parse_apache
from router.formats_sshd import parse_sshd

DATA = Path(__file__).resolve().parents[1] / "data"
MODULE = "_sessionizer_wire"
OTHER_NATIVE = ("_sessionizer_json", "_sessionizer_records")
"""The build's native modules besides this one, which still load without it."""
FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _native() -> Any:
    return load_native(MODULE)


@pytest.fixture(scope="module")
def decoder() -> Any:
    return _native().WireDecoder(
        Fragment, wire.KIND_HEADER, MIN_EVENT_TIME_MS, MAX_EVENT_TIME_MS, MAX_KEY_BYTES
    )


def shape(value: Any) -> Any:
    """`value` with every type spelled out: 1, 1.0 and True are three shapes."""
    if type(value) is Fragment:
        return ("Fragment", shape(value.key), value.timestamp_ms, shape(value.value))
    if type(value) is dict:
        return ("dict", [(shape(k), shape(v)) for k, v in value.items()])
    if type(value) is list:
        return ("list", [shape(v) for v in value])
    if type(value) is float:
        return ("float", "nan" if math.isnan(value) else struct.pack(">d", value))
    return (type(value).__name__, value)


def reference(key: Any, value: Any, headers: Any, timestamp_ms: Any) -> Any:
    """What the Python decoder makes of the record: a shape, or its dead-letter reason."""
    try:
        item = wire._decode(key, value, headers, timestamp_ms, 7)
    except UndecodableRecord as exc:
        return ("undecodable", exc.reason)
    if not isinstance(item, tuple):
        return ("watermark", item)
    return shape(Fragment(7, item[0], timestamp_ms, item[1]))


def agrees(decoder: Any, key: Any, value: Any, headers: Any, timestamp_ms: Any) -> bool:
    """Assert the property; return True if the native decoder decoded the record itself."""
    fast = decoder.decode(key, value, headers, timestamp_ms, 7)
    if fast is None:
        return False
    assert type(fast) is Fragment
    assert type(fast.key) is str and fast.timestamp_ms is timestamp_ms and fast.offset == 7
    assert shape(fast) == reference(key, value, headers, timestamp_ms)
    return True


_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=True)
    | st.text(max_size=20)
    | st.binary(max_size=20)
)
_keys = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=12,
)
_fields = st.dictionaries(st.text(max_size=12), _values, max_size=8)
_packings = st.sampled_from(
    [{"use_bin_type": True}, {"use_bin_type": False}, {"use_single_float": True}]
)
_good_keys = (
    st.text(min_size=1, max_size=40)
    .map(lambda t: t.encode("utf-8"))
    .filter(lambda b: 0 < len(b) <= MAX_KEY_BYTES)
)
_times = st.integers(MIN_EVENT_TIME_MS, MAX_EVENT_TIME_MS)
_headers = st.sampled_from([None, [], [("trace", b"1")], [("a", b""), ("b", None)], (("x", b"y"),)])


@FUZZ
@given(key=_good_keys, fields=_fields, packing=_packings, headers=_headers, at=_times)
def test_a_well_formed_fragment_decodes_natively_as_the_reference_does(
    decoder: Any,
    key: bytes,
    fields: dict[str, Any],
    packing: dict[str, Any],
    headers: Any,
    at: int,
) -> None:
    try:
        value = msgpack.packb(fields, **packing)
    except OverflowError:  # a double beyond float32, with use_single_float
        value = msgpack.packb(fields)
    # Natively exactly when the reference makes a fragment of it (not, say, of a string
    # packed as raw bytes that are not UTF-8, without use_bin_type).
    decodes = reference(key, value, headers, at)[0] == "Fragment"
    assert agrees(decoder, key, value, headers, at) == decodes


@FUZZ
@given(
    key=st.none() | st.binary(max_size=MAX_KEY_BYTES + 2) | st.text(max_size=4) | _good_keys,
    value=st.binary(max_size=64),
    headers=_headers
    | st.sampled_from(
        [
            [(wire.KIND_HEADER, wire.WATERMARK_KIND)],
            [("trace", b"1"), (wire.KIND_HEADER, b"resize")],
            [(wire.KIND_HEADER, None)],
            [("only-a-name",)],
            [[wire.KIND_HEADER, b"watermark"]],
            [(b"sessionizer-kind", b"x")],
            [("\udc80", b"a name that is no UTF-8")],
            "headers",
            5,
        ]
    ),
    timestamp=_times
    | st.integers()
    | st.sampled_from([True, None, 1.7e12, float("nan"), "1700000000000"]),
)
def test_any_record_decodes_natively_as_the_reference_does_or_goes_to_it(
    decoder: Any, key: Any, value: bytes, headers: Any, timestamp: Any
) -> None:
    agrees(decoder, key, value, headers, timestamp)


@FUZZ
@given(
    fields=_fields, cut=st.integers(0, 200), flip=st.integers(0, 255), tail=st.binary(max_size=3)
)
def test_a_damaged_value_decodes_natively_as_the_reference_does_or_goes_to_it(
    decoder: Any, fields: dict[str, Any], cut: int, flip: int, tail: bytes
) -> None:
    value = msgpack.packb(fields, use_bin_type=True)
    truncated = value[: cut % (len(value) + 1)]
    flipped = bytes([flip]) + value[1:] if value else value
    for damaged in (truncated, flipped, value + tail, value[:-1] + bytes([flip])):
        agrees(decoder, b"k", damaged, None, MIN_EVENT_TIME_MS)


def test_what_the_reference_alone_decides_goes_to_it(decoder: Any) -> None:
    good = msgpack.packb({"a": 1})
    given_back = {
        "a watermark": (None, msgpack.packb({"watermark": 5}), [(wire.KIND_HEADER, b"watermark")]),
        "a bytearray value": (b"k", bytearray(good), None),
        "a memoryview value": (b"k", memoryview(good), None),
        "a bytearray key": (bytearray(b"k"), good, None),
        "an extension type": (b"k", msgpack.packb({"t": msgpack.ExtType(1, b"x")}), None),
        "a timestamp": (b"k", msgpack.packb({"t": msgpack.Timestamp(1)}), None),
        "a map keyed by an array": (b"k", b"\x81\xa1a\x81\x91\x01\x02", None),
        "an integer field name": (b"k", msgpack.packb({1: 2}), None),
        "not a map": (b"k", msgpack.packb([1]), None),
        "a key over the limit": (b"k" * (MAX_KEY_BYTES + 1), good, None),
        "a key that is not UTF-8": (b"\xff", good, None),
        "a string that is not UTF-8": (b"k", b"\x81\xa1a\xa1\xff", None),
        "trailing bytes": (b"k", good + b"\x00", None),
        "a header name that is not UTF-8": (b"k", good, [("\udc80", b"x")]),
    }
    for name, (key, value, headers) in given_back.items():
        assert decoder.decode(key, value, headers, MIN_EVENT_TIME_MS, 7) is None, name
    nested: Any = 1
    for _ in range(100):
        nested = {"n": nested}
    deep = msgpack.packb(nested)
    assert decoder.decode(b"k", deep, None, MIN_EVENT_TIME_MS, 7) is None
    assert reference(b"k", deep, None, MIN_EVENT_TIME_MS)[0] == "Fragment"


def test_every_record_of_the_real_logs_decodes_natively(decoder: Any) -> None:
    records = []
    lines = (DATA / "apache_logs").read_text(encoding="utf-8", errors="replace").splitlines()
    for line in lines:
        try:
            records.append(parse_apache(line))
        except MalformedLine:  # the log's few lines that are not in the combined format
            continue
    for line in (DATA / "auth.log").read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            records.append(parse_sshd(line))
        except MalformedLine:  # lines the sshd format does not read: not records
            continue
    assert len(records) > 10_000
    for offset, fragment in enumerate(records):
        key, value = wire.encode_fragment(fragment)
        headers = [("trace", b"1")] if offset % 2 else None
        assert agrees(decoder, key, value, headers, fragment.timestamp_ms), fragment


def test_field_names_are_interned_and_bounded(decoder: Any) -> None:
    names = [f"field-{i}" for i in range(5000)]
    fast = decoder.decode(b"k", msgpack.packb(dict.fromkeys(names, 1)), None, MIN_EVENT_TIME_MS, 7)
    assert list(fast.value) == names
    assert decoder.names_kept() <= 4096
    again = decoder.decode(b"k", msgpack.packb({"field-1": 2}), None, MIN_EVENT_TIME_MS, 8)
    kept = next(name for name in fast.value if name == "field-1")
    assert next(iter(again.value)) is kept


def test_the_node_decodes_with_the_native_path_when_it_runs_compiled() -> None:
    _native()  # built (or skipped, or failed, as require_native says)
    script = "from router import wire; print(wire._FAST is not None)"
    assert printed_on("compiled", script) == "True"
    assert printed_on("python", script) == "False"


def _decided_with(build: Path) -> str:
    """What a fresh process on the compiled path makes of `build`: its path, whether it
    decodes in Python, the native modules it loaded, and why."""
    script = "from framework.kernel import compiled; from router import wire; " + (
        "c = compiled.choice(); print(c.path, wire._FAST is None, c.native, c.reason)"
    )
    child = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, compiled.DIR_ENV: str(build), compiled.ENV: "compiled"},
        capture_output=True,
        text=True,
        check=True,
    )
    return child.stdout


def _copy_of_the_build(tmp_path: Path) -> Path:
    _native()  # built (or skipped, or failed, as require_native says)
    copy = tmp_path / "compiled"
    shutil.copytree(compiled.default_build_dir().resolve(), copy)
    return copy


def test_a_build_without_native_modules_runs_compiled_with_the_python_decoder(
    tmp_path: Path,
) -> None:
    copy = _copy_of_the_build(tmp_path)
    manifest = json.loads((copy / compiled.MANIFEST).read_text(encoding="utf-8"))
    manifest["native"], manifest["native_problem"] = [], "no cargo on PATH (as a test)"
    (copy / compiled.MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    (copy / (MODULE + importlib.machinery.EXTENSION_SUFFIXES[0])).unlink()
    decided = _decided_with(copy)
    assert decided.startswith("compiled True () "), decided
    assert "native modules missing (no cargo on PATH (as a test))" in decided


def test_a_native_module_that_does_not_load_leaves_the_python_decoder_in_its_place(
    tmp_path: Path,
) -> None:
    copy = _copy_of_the_build(tmp_path)
    (copy / (MODULE + importlib.machinery.EXTENSION_SUFFIXES[0])).write_bytes(b"not a library")
    decided = _decided_with(copy)
    assert decided.startswith(f"compiled True {OTHER_NATIVE} "), decided
    assert f"native modules missing ({MODULE} does not load: " in decided


def test_a_native_module_missing_from_the_build_leaves_the_python_decoder_in_its_place(
    tmp_path: Path,
) -> None:
    # A build copied without one of its files: the mypyc modules still run, as they do
    # when a native module is there but does not load (it used to run all in Python).
    copy = _copy_of_the_build(tmp_path)
    (copy / (MODULE + importlib.machinery.EXTENSION_SUFFIXES[0])).unlink()
    decided = _decided_with(copy)
    assert decided.startswith(f"compiled True {OTHER_NATIVE} "), decided
    assert f"native modules missing ({MODULE} is missing from {copy})" in decided


def test_names_remembered_by_position_never_stand_for_other_bytes(decoder: Any) -> None:
    # The decoder remembers the last record's names by position: the same names in
    # another order, other names, and a name that is not UTF-8 where a good one was.
    records = [
        {"ip": "1", "path": "/a", "status": 200},
        {"ip": "2", "path": "/b", "status": 404},
        {"path": "/c", "ip": "3", "status": 500},
        {"ipv6": "::1", "path": "/d"},
        {"ip": "4", "pat": "/e", "status": 200, "extra": 1},
    ]
    for offset, fields in enumerate(records):
        value = msgpack.packb(fields)
        assert agrees(decoder, b"k", value, None, MIN_EVENT_TIME_MS)
        fast = decoder.decode(b"k", value, None, MIN_EVENT_TIME_MS, offset)
        assert list(fast.value.items()) == list(fields.items())
    # "ip" at position 0 again, then its bytes made invalid UTF-8 (0xa2: a 2-byte string).
    good = msgpack.packb({"ip": "5"})
    assert decoder.decode(b"k", good, None, MIN_EVENT_TIME_MS, 9) is not None
    bad = good.replace(b"\xa2ip", b"\xa2\xff\xfe", 1)
    assert reference(b"k", bad, None, MIN_EVENT_TIME_MS)[0] == "undecodable"
    assert decoder.decode(b"k", bad, None, MIN_EVENT_TIME_MS, 10) is None
