"""Fuzzing the state record: any bytes decode to a valid state or `CorruptStateError`.

And the other direction: every `StreamState` that can be built encodes (or is too
large), and decodes back equal.
"""

from __future__ import annotations

import zlib
from typing import Any

import msgpack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework.kernel.limits import MAX_EVENT_TIME_MS, MAX_KEY_BYTES, MIN_EVENT_TIME_MS
from state import CorruptStateError, IgnoreEntry, StateTooLargeError, StreamState
from state.record import MAX_BLOB_BYTES, MAX_OFFSET

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
STREAM = "app.stream.0007"


def decodes_or_is_corrupt(data: bytes) -> StreamState | None:
    """Assert the property: a state that round-trips, or `CorruptStateError`."""
    try:
        state = StreamState.decode(data, stream=STREAM)
    except CorruptStateError as exc:
        assert exc.stream == STREAM and exc.problem
        return None
    assert state.stream == STREAM
    assert StreamState.decode(state.encode(), stream=STREAM) == state
    return state


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.binary(max_size=8),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=15,
)
offsets = st.integers(0, MAX_OFFSET)
event_times = st.integers(MIN_EVENT_TIME_MS, MAX_EVENT_TIME_MS)
# Mostly in range, sometimes just outside or of the wrong type: the shapes damage takes.
plausible_ints = st.one_of(
    offsets,
    event_times,
    st.sampled_from([-1, 0, MAX_OFFSET, MAX_OFFSET + 1, 2**64 - 1, MAX_EVENT_TIME_MS + 1]),
    st.sampled_from([float("inf"), float("nan"), 1.0, True, None, "1", b"1"]),
)
keys = st.one_of(
    st.text(min_size=1, max_size=20),
    st.sampled_from(["", "k" * MAX_KEY_BYTES, "k" * (MAX_KEY_BYTES + 1)]),
    st.integers(-(2**63), 2**64 - 1),
    st.binary(max_size=5),
)
ignore_entries = st.one_of(
    st.lists(st.one_of(keys, plausible_ints), min_size=5, max_size=5),
    st.tuples(keys, event_times, event_times, offsets, offsets).map(list),
    st.lists(plausible_ints, max_size=6),
    values,
)


def framed(body: bytes, compressed: bool) -> bytes:
    """Frame a msgpack body the way `encode` does, plain or zlib-compressed."""
    return b"\x01" + zlib.compress(body) if compressed else b"\x00" + body


@FUZZ
@given(data=st.binary(max_size=80))
def test_arbitrary_bytes_decode_or_are_corrupt(data: bytes) -> None:
    decodes_or_is_corrupt(data)


@FUZZ
@given(body=st.binary(max_size=80), compressed=st.booleans())
def test_arbitrary_bodies_behind_a_valid_marker_decode_or_are_corrupt(
    body: bytes, compressed: bool
) -> None:
    decodes_or_is_corrupt(framed(body, compressed))


@FUZZ
@given(value=values, compressed=st.booleans())
def test_arbitrary_msgpack_values_decode_or_are_corrupt(value: Any, compressed: bool) -> None:
    decodes_or_is_corrupt(framed(msgpack.packb(value, use_bin_type=True), compressed))


ignore_lists = st.lists(
    st.builds(
        lambda key, span, offset, tail: IgnoreEntry(key, *sorted(span), offset, tail),
        st.text(min_size=1, max_size=30),
        st.tuples(event_times, event_times),
        offsets,
        offsets,
    ),
    max_size=8,
).map(tuple)
states = st.builds(
    lambda offsets_pair, epoch, time, ignore, blob, open_sessions: StreamState(
        STREAM,
        epoch,
        min(offsets_pair),
        max(offsets_pair),
        time,
        ignore,
        blob,
        open_sessions,
    ),
    st.tuples(offsets, offsets),
    offsets,
    st.one_of(st.none(), event_times),
    ignore_lists,
    st.one_of(st.none(), st.binary(max_size=64), st.just(b"\xab" * MAX_BLOB_BYTES)),
    offsets,
)


damaged = {
    "v": plausible_ints,
    "stream": st.text(max_size=5),
    "epoch": plausible_ints,
    "safe": plausible_ints,
    "committed": plausible_ints,
    "time": plausible_ints,
    "ignore": st.one_of(st.lists(ignore_entries, max_size=3), values),
    "blob": st.one_of(st.binary(max_size=20), values),
    "open": plausible_ints,
    "extra": values,
}


@st.composite
def plausible_fields(draw: st.DrawFn) -> dict[str, Any]:
    """The fields of a valid state with zero to two members damaged, dropped or added."""
    state = draw(states)
    fields: dict[str, Any] = {
        "v": 1,
        "stream": STREAM,
        "epoch": state.epoch,
        "safe": state.safe_offset,
        "committed": state.committed_offset,
        "time": state.stream_time_ms,
        "ignore": [entry.to_list() for entry in state.ignore],
        "blob": state.user_blob,
        "open": state.open_sessions,
    }
    for name in draw(st.lists(st.sampled_from(sorted(damaged)), max_size=2, unique=True)):
        if draw(st.booleans()):
            fields.pop(name, None)
        else:
            fields[name] = draw(damaged[name])
    if fields.get("ignore") and isinstance(fields["ignore"], list) and draw(st.booleans()):
        index = draw(st.integers(0, len(fields["ignore"]) - 1))
        fields["ignore"][index] = draw(ignore_entries)
    return fields


@FUZZ
@given(fields=plausible_fields(), compressed=st.booleans())
def test_plausible_maps_decode_or_are_corrupt(fields: dict[str, Any], compressed: bool) -> None:
    decodes_or_is_corrupt(framed(msgpack.packb(fields, use_bin_type=True), compressed))


@FUZZ
@given(state=states)
def test_every_state_that_can_be_built_encodes_and_round_trips(state: StreamState) -> None:
    assert StreamState.decode(state.encode(), stream=STREAM) == state


@FUZZ
@given(state=states, position=st.integers(0, 10_000), byte=st.integers(0, 255))
def test_a_single_byte_corruption_of_a_record_decodes_or_is_corrupt(
    state: StreamState, position: int, byte: int
) -> None:
    data = state.encode()
    position %= len(data)
    decodes_or_is_corrupt(data[:position] + bytes([byte]) + data[position + 1 :])


@FUZZ
@given(
    epoch=plausible_ints,
    safe=plausible_ints,
    committed=plausible_ints,
    time=plausible_ints,
    entry=st.lists(st.one_of(keys, plausible_ints), min_size=5, max_size=5),
    blob=st.one_of(st.none(), st.binary(max_size=8), values),
    open_sessions=plausible_ints,
)
def test_a_state_is_either_refused_at_construction_or_encodable(
    epoch: Any, safe: Any, committed: Any, time: Any, entry: list, blob: Any, open_sessions: Any
) -> None:
    try:
        state = StreamState(
            STREAM, epoch, safe, committed, time, (IgnoreEntry(*entry),), blob, open_sessions
        )
    except ValueError as exc:
        assert STREAM in str(exc)
        return
    try:
        data = state.encode(limit=200)
    except StateTooLargeError:
        data = state.encode()
    assert StreamState.decode(data, stream=STREAM) == state
