"""Every decoder of data read from ZooKeeper or the handover topic is total.

Znode data and handover records come from outside the node (older versions,
zkCli, a buggy or foreign writer).  For any bytes, at any nesting depth, each
decoder returns a value or its documented error; hypothesis feeds raw bytes,
JSON-shaped text and valid documents with one value replaced.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kazoo.exceptions import NoNodeError

from balancer import claims
from balancer.load import StreamLoad
from framework.kernel.paths import AppPaths
from framework.testing.member import decode_counter
from framework.testing.settled import Settled
from router.errors import ProvisioningError
from router.producer_registry import ProducerRegistry
from router.registry import recorded_stream_count
from state.errors import CorruptStateError
from state.handover import HandoverMissing, HandoverPointer, HandoverRecord
from state.handover_zookeeper import ZooKeeperPointers

STREAM = "app.stream.0007"
POINTER = {"epoch": 3, "committed": 40, "offset": 12, "size": 300, "checksum": "ab" * 16}
REGISTRATION = {"topic": STREAM, "created": 1, "handover": POINTER, "resumed": {"node": "n1"}}
LOAD = {"node": "n1", "rate": 12.5, "busy": 0.25, "moved_at": 1_700_000_000.5}
PRODUCER = {"streams": [STREAM], "watermark": 5, "ended": False, "left": False, "joined": True}


class Stat:
    version = 0


class FakeClient:
    """`get` (and `get_async`) of one znode's data (kazoo's signatures); a missing path raises
    `NoNodeError`."""

    def __init__(self, data: bytes | None) -> None:
        self.data = data

    def get(self, path: str) -> tuple[bytes | None, Stat]:
        if self.data is None:
            raise NoNodeError()
        return self.data, Stat()

    def get_async(self, path: str) -> Settled:
        return Settled(lambda: self.get(path))


def _pointer(data: bytes) -> HandoverPointer | None:
    return ZooKeeperPointers(FakeClient(data), "/s/app/active_streams").read(STREAM)  # type: ignore[arg-type]


def _count(data: bytes) -> int | None:
    try:
        return recorded_stream_count(FakeClient(data), "/s/app/active_streams")  # type: ignore[arg-type]
    except ProvisioningError:
        return None


def _counter(data: bytes) -> int | None:
    try:
        return decode_counter(data, STREAM)
    except CorruptStateError:
        return None


def _producers(data: bytes) -> dict[str, Any]:
    registry = ProducerRegistry(FakeClient(data), AppPaths("app"), "me", [STREAM])  # type: ignore[arg-type]
    registry._refresh({"other"})  # reads the other's data
    registry._client = FakeClient(None)  # type: ignore[assignment]
    registry._refresh(set())  # it vanished: its streams get a `left` marker
    return {}


def _record(data: bytes) -> HandoverRecord | None:
    try:
        return HandoverRecord.decode(data, stream=STREAM)
    except HandoverMissing:
        return None


DECODERS: dict[str, Callable[[bytes], object]] = {
    "claims.decode": claims.decode,
    "StreamLoad.decode": StreamLoad.decode,
    "ZooKeeperPointers.read": _pointer,
    "recorded_stream_count": _count,
    "member.decode_counter": _counter,
    "ProducerRegistry._refresh": _producers,
    "HandoverRecord.decode": _record,
}

_DEEP = [b"[" * 100_000, b"{" * 100_000, b'{"handover":' + b"[" * 100_000 + b"]" * 100_000 + b"}"]
_ODD_NUMBERS = ["Infinity", "-Infinity", "NaN", "1e999", "-1e999", "9" * 5000, "1e308", "-0"]


@pytest.mark.parametrize("name", sorted(DECODERS))
@pytest.mark.parametrize("data", _DEEP, ids=["brackets", "braces", "nested-pointer"])
def test_deep_nesting_is_no_value_not_a_recursion_error(name: str, data: bytes) -> None:
    DECODERS[name](data)


def test_a_pointer_with_an_infinite_epoch_is_no_pointer() -> None:
    for number in [*_ODD_NUMBERS[:7], "1.5", '"3"', "true", "-3"]:
        text = json.dumps(REGISTRATION).replace('"epoch": 3', f'"epoch": {number}')
        assert _pointer(text.encode()) is None, number
    assert _pointer(json.dumps(REGISTRATION).encode()) == HandoverPointer(3, 40, 12, 300, "ab" * 16)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes(data: bytes) -> None:
    for decode in DECODERS.values():
        decode(data)


_JSON_ATOMS = st.sampled_from(["[", "]", "{", "}", ",", ":", '"a"', '"\\ud800"', *_ODD_NUMBERS])


@settings(max_examples=300, deadline=None)
@given(st.lists(_JSON_ATOMS, max_size=60))
def test_any_json_shaped_text(atoms: list[str]) -> None:
    data = "".join(atoms).encode()
    for decode in DECODERS.values():
        decode(data)


_REPLACEMENTS = st.one_of(
    st.sampled_from([*_ODD_NUMBERS, "null", "true", "[]", "{}", '""', "-1", "1.5", '"x"']),
    st.integers().map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers(1, 50_000).map(lambda depth: "[" * depth + "]" * depth),
)


@st.composite
def _documents(draw: st.DrawFn) -> bytes:
    """A valid document of one of the kinds, with one value replaced by odd JSON text."""
    document = dict(draw(st.sampled_from([REGISTRATION, LOAD, PRODUCER, {"count": 8}])))
    inner = document if "handover" not in document or draw(st.booleans()) else POINTER
    inner = dict(inner)
    inner[draw(st.sampled_from(sorted(inner)))] = "\x00replaced"
    if inner.keys() == POINTER.keys():
        document["handover"] = inner
    else:
        document = inner
    return json.dumps(document).replace('"\\u0000replaced"', draw(_REPLACEMENTS)).encode()


@settings(max_examples=300, deadline=None)
@given(_documents())
def test_valid_documents_with_one_value_replaced(data: bytes) -> None:
    for decode in DECODERS.values():
        decode(data)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_a_handover_record_of_any_body_is_a_record_or_corrupt(body: bytes) -> None:
    for marker in (b"\x00", b"\x01"):
        data = marker + body
        record = _record(data)
        if record is not None:
            assert record.stream == STREAM and isinstance(record.engine, bytes)
