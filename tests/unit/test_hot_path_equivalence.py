"""The compiled hot path and the Python one write the same bytes (`framework.kernel.compiled`).

On random streams (`framework.testing.engine_cases.scenarios`: out-of-order fragments,
END fragments, watermarks, records dated far ahead, two producers, hooks that raise;
some record values replaced by junk: raw bytes, msgpack of nested maps, arrays, ext
types, timestamps, odd keys, a changed byte) a `StreamTask` on each path, crashed
(rewound to its last commit) and handed over (`export_engine` / `restore_engine`) at
the same random points, writes byte-identical sessions (`encode_session`), dead
letters (key, value, headers: the stack trace too) and committed states
(`StreamState.encode`).  On random fragments (unencodable ones, refused streams, event
times that jump) a `StreamProducer` on each path sends the same records, watermarks and
errors.  The path is chosen per process, so each runs in a worker
process (framework/testing/hot_path_runs.py) started with `SESSIONIZER_HOT_PATH` set.

Without a build the compiled side skips only on a machine that cannot build it (no
mypyc or C compiler); with CI=true, or where a build could be made, it fails.
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
from framework.testing.engine_cases import Scenario, scenarios
from framework.testing.hot_path_runs import STREAM, Worker, require_compiled
from router.fragment import ParsedFragment
from router.wire import encode_fragment, encode_watermark

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


@pytest.fixture(scope="module")
def workers() -> Iterator[tuple[Worker, Worker]]:
    """A worker on the Python path and one on the compiled path."""
    with Worker("python") as python, Worker("compiled") as fast:
        path, reason, files = python.call("hello")
        assert path == "python" and all(f.endswith(".py") for f in files.values()), files
        path, reason, files = fast.call("hello")
        if path != "compiled":
            require_compiled(reason)
        assert not any(f.endswith(".py") for f in files.values()), files
        yield python, fast


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


@settings(max_examples=300, deadline=None)
@given(scenarios(), st.data())
def test_both_paths_write_the_same_sessions_dead_letters_and_states(
    workers: tuple[Worker, Worker], scenario: Scenario, data: st.DataObject
) -> None:
    python, fast = workers
    count = len(scenario.records)
    indexes = st.integers(0, count - 1)
    junk = data.draw(st.dictionaries(indexes, values(), max_size=3), label="junk")
    events = data.draw(
        st.dictionaries(indexes, st.sampled_from(["crash", "handover"]), max_size=4),
        label="events",
    )
    records = _wire(scenario, junk)
    assert fast.call("run", scenario, records, events) == python.call(
        "run", scenario, records, events
    )


@st.composite
def producer_inputs(draw: st.DrawFn) -> list[ParsedFragment]:
    """Fragments for `StreamProducer`: a few keys, event times that jump (watermarks fall
    due), some unencodable (a field name not a string, an integer over 64 bits, an event
    time out of range, a key over the limit)."""
    fragments, clock = [], draw(st.integers(0, 2**41))
    for _ in range(draw(st.integers(0, 60))):
        clock = max(0, clock + draw(st.integers(-600_000, 3_000_000)))
        key = draw(st.sampled_from(["a", "b", "c", "d", "é", "é" * 2049]))
        fields: dict[Any, Any] = draw(st.dictionaries(st.text(max_size=4), _SCALARS, max_size=3))
        if draw(st.integers(0, 9)) == 0:
            fields[draw(st.sampled_from([1, b"x", None]))] = 1
        stamp = clock if draw(st.integers(0, 19)) else draw(st.sampled_from([2**62, 2**50]))
        fragments.append(ParsedFragment(key, stamp, fields))
    return fragments


@settings(max_examples=200, deadline=None)
@given(producer_inputs(), st.integers(1, 5), st.integers(1, 1_200_000), st.sets(st.integers(0, 4)))
def test_both_paths_send_the_same_records_and_watermarks(
    workers: tuple[Worker, Worker],
    fragments: list[ParsedFragment],
    streams: int,
    interval: int,
    refuse: set[int],
) -> None:
    python, fast = workers
    args = (fragments, streams, interval, refuse)
    assert fast.call("produce", *args) == python.call("produce", *args)
