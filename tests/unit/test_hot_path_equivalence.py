"""The compiled record decoder and the Python one give the same bytes out (`router.hot_path`).

On random record values (msgpack of nested maps, arrays, ext types, timestamps,
odd keys, and raw bytes) `decode_fragment` returns the same fragment or raises
the same dead-letter reason and text on both paths.  On random streams
(`framework.testing.engine_cases.scenarios`, some values replaced by such junk)
a `StreamTask` run on each path, crashed (rewound to its last commit) and handed
over (`export_engine` / `restore_engine`) at the same random points, writes
byte-identical sessions (`encode_session`), dead letters (key, value, headers)
and committed states (`StreamState.encode`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.kernel.records import StreamRecord
from framework.kernel.watermark import Watermark
from framework.node.task import StreamTask
from framework.testing.engine_cases import Scenario, scenarios
from router import hot_path
from router.errors import UndecodableRecord
from router.fragment import ParsedFragment
from router.wire import decode_fragment, encode_fragment, encode_watermark
from sessionizer.handover import HandoverUnavailable, export_engine, restore_engine
from sessionizer.records import FinishedSession
from sessionizer.sinks import UnsendableSession, encode_session
from state.record import StreamState

STREAM = "app.stream.0007"

pytestmark = pytest.mark.skipif(
    not hot_path.compiled_available(), reason="msgspec is not installed"
)

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.binary(max_size=8)
)
_KEYS = st.text(max_size=6) | st.integers(-5, 5) | st.none() | st.booleans() | st.binary(max_size=3)
_VALUES = st.recursive(
    _SCALARS
    | st.builds(msgpack.ExtType, st.integers(0, 127), st.binary(max_size=4))
    | st.builds(msgpack.Timestamp, st.integers(0, 2**32 - 1), st.integers(0, 999_999_999)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def values(draw: st.DrawFn) -> bytes:
    """A record value: msgpack of a map (flat or nested) or of anything, or raw bytes."""
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return draw(st.binary(max_size=24))
    if kind == 1:
        fields = draw(st.dictionaries(st.text(max_size=6), _SCALARS, max_size=5))
        packed: bytes = msgpack.packb(fields, use_bin_type=True)
        return packed
    packed = msgpack.packb(draw(_VALUES), use_bin_type=True)
    if kind == 3 and packed:  # one byte changed: truncations, bad UTF-8, wrong lengths
        at = draw(st.integers(0, len(packed) - 1))
        packed = packed[:at] + bytes([draw(st.integers(0, 255))]) + packed[at + 1 :]
    return packed


def _restore() -> None:
    """Back to the path the environment chose (the other tests run on it)."""
    hot_path.select(hot_path.requested() if hot_path.requested() in hot_path.PATHS else "python")


def _decoded(value: bytes, path: str) -> str:
    """What decoding gives on `path`: the fragment or watermark, or the dead letter's reason."""
    hot_path.select(path)
    try:
        return repr(decode_fragment(b"k", value, None, 1_000, 5))
    except UndecodableRecord as exc:
        return f"{exc.reason}: {exc}"


@settings(max_examples=1_000, deadline=None)
@given(values())
def test_both_decoders_give_the_same_fragment_or_the_same_dead_letter(value: bytes) -> None:
    try:
        assert _decoded(value, "compiled") == _decoded(value, "python")
    finally:
        _restore()


def test_a_flat_map_takes_the_compiled_path_and_a_nested_one_does_not() -> None:
    hot_path.select("compiled")
    unpack = hot_path.fast_unpacker()
    _restore()
    assert unpack is not None
    assert unpack(msgpack.packb({"ip": "1.2.3.4", "bytes": 12, "x": None})) == {
        "ip": "1.2.3.4",
        "bytes": 12,
        "x": None,
    }
    assert unpack(msgpack.packb({"a": [1]})) is None
    assert unpack(msgpack.packb({"t": msgpack.Timestamp(1, 0)})) is None


def _wire(scenario: Scenario, junk: dict[int, bytes]) -> list[StreamRecord]:
    """The scenario's records as Kafka records; the values at `junk`'s indexes replaced."""
    records = []
    for index, record in enumerate(scenario.records):
        assert record.offset is not None
        if isinstance(record, Watermark):
            value, headers = encode_watermark(record)
            wire = StreamRecord(STREAM, record.offset, None, value, record.timestamp_ms, headers)
        else:
            key, value = encode_fragment(
                ParsedFragment(record.key, record.timestamp_ms, record.value)
            )
            wire = StreamRecord(STREAM, record.offset, key, value, record.timestamp_ms, [])
        if index in junk:
            wire = StreamRecord(
                STREAM, wire.offset, wire.key, junk[index], wire.timestamp, wire.headers
            )
        records.append(wire)
    return records


def _encoded(output: Any) -> bytes:
    """The bytes a sink writes for one output (a session's JSON, a dead letter's record)."""
    if isinstance(output, FinishedSession):
        try:
            return encode_session(output)
        except UnsendableSession as exc:
            return f"unsendable {exc.reason}: {exc.error}".encode()
    return repr((output.key, output.value, output.headers())).encode()


def _run(
    scenario: Scenario, records: list[StreamRecord], events: dict[int, str]
) -> Iterator[bytes]:
    """Run one task over the records, crashing or handing over before the given indexes."""
    task = StreamTask.resume(scenario.processor(), StreamState.initial(STREAM))
    pending, index = dict(events), 0
    while index < len(records):
        event = pending.pop(index, None)
        if event is not None:
            state = task.snapshot()
            yield state.encode()
            task.committed_as(state)
            try:
                if event != "handover":
                    raise HandoverUnavailable(STREAM, "a crash")
                engine = restore_engine(scenario.processor(), state, export_engine(task.engine))
                task = StreamTask(STREAM, engine, position=task.position, committed=state)
            except HandoverUnavailable:  # a crash, or a session the processor cannot dump
                task = task.rewound()
                index = next(i for i, r in enumerate(records) if r.offset >= task.position)
                continue
        yield from (_encoded(output) for output in task.handle(records[index]))
        index += 1
    yield task.snapshot().encode()


@settings(max_examples=300, deadline=None)
@given(scenarios(), st.data())
def test_both_paths_write_the_same_sessions_dead_letters_and_states(
    scenario: Scenario, data: st.DataObject
) -> None:
    count = len(scenario.records)
    indexes = st.integers(0, count - 1)
    junk = data.draw(st.dictionaries(indexes, values(), max_size=3), label="junk")
    events = data.draw(
        st.dictionaries(indexes, st.sampled_from(["crash", "handover"]), max_size=4),
        label="events",
    )
    records = _wire(scenario, junk)
    try:
        hot_path.select("python")
        reference = list(_run(scenario, records, events))
        hot_path.select("compiled")
        compiled = list(_run(scenario, records, events))
    finally:
        _restore()
    assert compiled == reference
