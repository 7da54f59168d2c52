"""StreamState encoding, the size guard, and the fencing contract of MemoryStateStore."""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Sequence

import msgpack
import pytest

from framework.kernel.limits import MAX_EVENT_TIME_MS, MAX_KEY_BYTES, MIN_EVENT_TIME_MS
from framework.testkit.engine_runs import OffsetRecorder
from sessionizer import Fragment, SessionEngine
from state import (
    DEFAULT_LIMIT_BYTES,
    JUTE_MAXBUFFER,
    CommitUncertainError,
    CorruptStateError,
    FencedError,
    FencedStateStore,
    IgnoreEntry,
    MemoryStateStore,
    StateError,
    StateStore,
    StateTooLargeError,
    StreamState,
    VersionedMemory,
)
from state.record import MAX_BLOB_BYTES, MAX_BODY_BYTES, MAX_OFFSET

STREAM = "app.stream.0003"


def _state(entries: int, *, blob: bytes | None = b"\x00user") -> StreamState:
    ignore = tuple(
        IgnoreEntry(f"10.0.0.{i % 250}|agent", 1_000 + i, 2_000 + i, 50 + i, 49 + i)
        for i in range(entries)
    )
    return StreamState(STREAM, 7, 40, 120, 1_431_857_103_000, ignore, blob, open_sessions=3)


@pytest.mark.parametrize(("entries", "marker"), [(2, 0x00), (500, 0x01)])
def test_round_trip_plain_and_compressed(entries: int, marker: int) -> None:
    state = _state(entries)
    data = state.encode()
    assert data[0] == marker
    assert StreamState.decode(data, stream=STREAM) == state


def test_compressed_record_is_zlib_of_the_msgpack_body() -> None:
    data = _state(500).encode()
    body = msgpack.unpackb(zlib.decompress(data[1:]))
    assert (body["v"], body["safe"], body["committed"], len(body["ignore"])) == (1, 40, 120, 500)


@pytest.mark.parametrize("data", [None, b""])
def test_absent_record_means_start_from_offset_zero(data: bytes | None) -> None:
    state = StreamState.decode(data, stream=STREAM)
    assert (state.safe_offset, state.committed_offset, state.ignore) == (0, 0, ())
    assert (state.stream_time_ms, state.user_blob) == (None, None)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"\x07whatever", "unknown marker byte 0x07"),
        (b"\x01not zlib", "error"),
        (b"\x00" + msgpack.packb([1, 2]), "expected a map"),
        (b"\x00" + msgpack.packb({"v": 99, "stream": STREAM}), "format version 99"),
        (b"\x00" + msgpack.packb({"v": 1, "stream": "x"}), "belongs to stream 'x'"),
        (b"\x00" + msgpack.packb({"v": 1, "stream": STREAM}), "missing field 'epoch'"),
    ],
)
def test_corrupt_records_raise_naming_the_stream(data: bytes, problem: str) -> None:
    with pytest.raises(CorruptStateError, match=STREAM) as caught:
        StreamState.decode(data, stream=STREAM)
    assert problem in str(caught.value)


def test_size_guard_names_stream_size_limit_and_the_way_out() -> None:
    state = _state(3)
    size = len(state.encode())
    with pytest.raises(StateTooLargeError) as caught:
        state.encode(limit=size - 1)
    message = str(caught.value)
    assert STREAM in message and f"{size} bytes" in message and f"{size - 1} bytes" in message
    assert "max_session_duration" in message
    assert state.encode(limit=size) == state.encode()


def test_default_limit_is_below_zookeepers_jute_maxbuffer() -> None:
    assert DEFAULT_LIMIT_BYTES < JUTE_MAXBUFFER


def _long_session_stream(sessions: int) -> list[Fragment]:
    """One visitor stays 'online' for the whole stream while `sessions` others come and go."""
    fragments: list[Fragment] = []
    for i in range(sessions):
        ts = 1_431_857_103_000 + i * 1_000
        if i % 300 == 0:  # every 5 minutes: the long session goes on
            fragments.append(Fragment(len(fragments), "long|bot", ts, {"o": len(fragments)}))
        # Realistic keys (client ip | user agent) do not compress away.
        agent = hashlib.sha256(str(i).encode()).hexdigest()[:24]
        key = f"10.{i % 256}.{i // 256 % 256}.{i // 65536}|Mozilla/5.0 {agent}"
        fragments.append(Fragment(len(fragments), key, ts, {"o": len(fragments)}))
    return fragments


def _snapshot_after(
    fragments: list[Fragment], processor: OffsetRecorder, resume: StreamState
) -> StreamState:
    # The engine's ignore-list budget would force-close the long session before the
    # record grows this large; switched off here to test the store's size guard itself.
    engine = SessionEngine(STREAM, processor, resume=resume, ignore_budget_bytes=10**12)
    for fragment in fragments:
        engine.process(fragment)
    return engine.snapshot(fragments[-1].offset + 1)


def test_long_session_hits_the_size_guard_instead_of_writing() -> None:
    fragments = _long_session_stream(60_000)
    memory = VersionedMemory()
    store = MemoryStateStore(memory)
    resume = store.load(STREAM, memory.take(STREAM))
    state = _snapshot_after(fragments, OffsetRecorder(timeout_ms=30 * 60_000), resume)
    assert state.safe_offset == 0  # the long session holds the safe offset back
    with pytest.raises(StateTooLargeError, match=f"stream {STREAM}: encoded state is") as caught:
        store.commit(STREAM, state)
    assert memory.read(STREAM) == (b"", 1)  # nothing written
    # What the message advises: bounding sessions bounds the ignore list.
    bounded_processor = OffsetRecorder(timeout_ms=30 * 60_000, max_ms=60 * 60_000)
    bounded = _snapshot_after(fragments, bounded_processor, resume)
    store.commit(STREAM, bounded)
    print(
        f"\nlong session: {len(state.ignore)} ignore entries, {caught.value.size} bytes; "
        f"with max_session_duration=1h the record is {len(bounded.encode())} bytes"
    )


def test_memory_store_is_a_state_store() -> None:
    assert isinstance(MemoryStateStore(), StateStore)


def test_commits_advance_the_version_and_load_returns_the_owners_epoch() -> None:
    memory = VersionedMemory()
    store = MemoryStateStore(memory)
    epoch = memory.take(STREAM)
    assert store.load(STREAM, epoch) == StreamState.initial(STREAM, epoch)
    state = StreamState(STREAM, epoch, safe_offset=3, committed_offset=5)
    store.commit(STREAM, state)
    store.commit(STREAM, state)
    assert memory.read(STREAM)[1] == epoch + 2
    # The next owner reads the record under its own epoch.
    other = MemoryStateStore(memory)
    loaded = other.load(STREAM, memory.take(STREAM))
    assert (loaded.safe_offset, loaded.epoch) == (3, epoch + 3)


def test_a_stale_owner_is_fenced_and_cannot_move_the_state_back() -> None:
    memory = VersionedMemory()
    old, new = MemoryStateStore(memory), MemoryStateStore(memory)
    old_epoch = memory.take(STREAM)
    old.load(STREAM, old_epoch)
    old.commit(STREAM, StreamState(STREAM, old_epoch, safe_offset=10, committed_offset=10))
    new_epoch = memory.take(STREAM)  # the balancer hands the stream to another node
    new.load(STREAM, new_epoch)
    new.commit(STREAM, StreamState(STREAM, new_epoch, safe_offset=20, committed_offset=20))
    with pytest.raises(FencedError, match=f"stream {STREAM}: state commit fenced"):
        old.commit(STREAM, StreamState(STREAM, old_epoch, safe_offset=12, committed_offset=12))
    assert StreamState.decode(memory.read(STREAM)[0], stream=STREAM).safe_offset == 20
    with pytest.raises(StateError, match="does not own it"):  # fenced means released
        old.commit(STREAM, StreamState(STREAM, old_epoch, safe_offset=12, committed_offset=12))


def test_load_with_a_stale_epoch_is_fenced() -> None:
    memory = VersionedMemory()
    epoch = memory.take(STREAM)
    memory.take(STREAM)
    with pytest.raises(FencedError, match="expected version 1, it is now at version 2"):
        MemoryStateStore(memory).load(STREAM, epoch)


def test_commit_needs_ownership_and_the_right_epoch() -> None:
    memory = VersionedMemory()
    store = MemoryStateStore(memory)
    with pytest.raises(StateError, match="commit without load"):
        store.commit(STREAM, StreamState.initial(STREAM))
    epoch = memory.take(STREAM)
    store.load(STREAM, epoch)
    with pytest.raises(StateError, match="at epoch 9"):
        store.commit(STREAM, StreamState.initial(STREAM, epoch=9))
    store.release(STREAM)
    with pytest.raises(StateError, match="commit without load"):
        store.commit(STREAM, StreamState.initial(STREAM, epoch=epoch))


class _CountedRecords(VersionedMemory):
    """Records that count their reads; one stream's read fails as a lost connection's does."""

    def __init__(self, failing: str) -> None:
        super().__init__()
        self.failing, self.reads, self.batches = failing, 0, 0

    def read(self, stream: str) -> tuple[bytes, int]:
        self.reads += 1
        if stream == self.failing:
            raise StateError(f"stream {stream}: cannot read its state (told to)")
        return super().read(stream)

    def read_many(self, streams: Sequence[str]) -> dict[str, tuple[bytes, int] | Exception]:
        self.batches += 1
        results: dict[str, tuple[bytes, int] | Exception] = {}
        for stream in streams:
            try:
                results[stream] = self.read(stream)
            except StateError as exc:
                results[stream] = exc
        return results


def test_an_assignment_reads_its_states_at_once_and_a_failed_read_stays_its_streams() -> None:
    streams = [f"app.stream.{i:04d}" for i in range(3)]
    records = _CountedRecords(failing=streams[1])
    store = FencedStateStore(records)
    epochs = {stream: records.take(stream) for stream in streams}
    store.prepare(streams)
    assert (records.batches, records.reads) == (1, 3)
    assert store.load(streams[0], epochs[streams[0]]) == StreamState.initial(streams[0], 1)
    with pytest.raises(StateError, match="told to"):
        store.load(streams[1], epochs[streams[1]])
    assert store.load(streams[2], epochs[streams[2]]).epoch == epochs[streams[2]]
    assert records.reads == 3, "each load took what prepare read"
    records.take(streams[0])  # taken again: a later load reads anew and sees it
    with pytest.raises(FencedError, match="it is now at version 2"):
        store.load(streams[0], epochs[streams[0]])
    assert records.reads == 4


class _UncertainRecords(VersionedMemory):
    """Records whose writes fail the way a dropped ZooKeeper connection does."""

    def write(self, stream: str, data: bytes, expected: int) -> int:
        raise CommitUncertainError(stream, "ConnectionLoss()")


def test_an_uncertain_commit_gives_the_stream_up() -> None:
    records = _UncertainRecords()
    store = FencedStateStore(records)
    epoch = records.take(STREAM)
    store.load(STREAM, epoch)
    with pytest.raises(CommitUncertainError):
        store.commit(STREAM, StreamState.initial(STREAM, epoch))
    with pytest.raises(StateError, match="commit without load"):
        store.commit(STREAM, StreamState.initial(STREAM, epoch))


# --- issue 12: decoding a stored record is total (reproductions first) ---

_GOOD_FIELDS = {
    "v": 1,
    "stream": STREAM,
    "epoch": 7,
    "safe": 40,
    "committed": 120,
    "time": 1_431_857_103_000,
    "ignore": [["10.0.0.1|agent", 1_000, 2_000, 50, 49]],
    "blob": b"\x00user",
    "open": 3,
}


def _record(**changes: object) -> bytes:
    return b"\x00" + msgpack.packb({**_GOOD_FIELDS, **changes}, use_bin_type=True)


def test_the_good_fields_decode() -> None:
    state = StreamState.decode(_record(), stream=STREAM)
    assert state.ignore == (IgnoreEntry("10.0.0.1|agent", 1_000, 2_000, 50, 49),)


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"safe": float("inf")}, "safe"),
        ({"committed": float("inf")}, "committed"),
        ({"epoch": float("-inf")}, "epoch"),
        ({"time": float("inf")}, "time"),
        ({"time": float("nan")}, "time"),
        ({"open": float("inf")}, "open"),
        ({"safe": -1}, "safe"),
        ({"epoch": -1}, "epoch"),
        ({"open": -1}, "open"),
        ({"committed": 2**64 - 1}, "committed"),
        ({"epoch": 2**63}, "epoch"),
        ({"safe": 121}, "safe"),
        ({"safe": "40"}, "safe"),
        ({"safe": 40.0}, "safe"),
        ({"epoch": True}, "epoch"),
        ({"time": 1.5}, "time"),
        ({"time": -1}, "time"),
        ({"time": 253_402_300_800_000}, "time"),
        ({"blob": "text"}, "blob"),
        ({"blob": [1, 2]}, "blob"),
        ({"blob": 2**62}, "blob"),
        ({"blob": b"x" * (64 * 1024 + 1)}, "blob"),
        ({"ignore": 5}, "ignore"),
        ({"ignore": [["k", 1, 2, 3]]}, "ignore"),
        ({"ignore": [[5, 1, 2, 3, 3]]}, "ignore"),
        ({"ignore": [["", 1, 2, 3, 3]]}, "ignore"),
        ({"ignore": [["k" * 4097, 1, 2, 3, 3]]}, "ignore"),
        ({"ignore": [["k", 2, 1, 3, 3]]}, "ignore"),
        ({"ignore": [["k", -1, 1, 3, 3]]}, "ignore"),
        ({"ignore": [["k", 1, 2, float("inf"), 3]]}, "ignore"),
        ({"ignore": [["k", 1, 2, 3, -3]]}, "ignore"),
        ({"ignore": [["k", 1, 2.5, 3, 3]]}, "ignore"),
        ({"ignore": {"k": 1}}, "ignore"),
        ({"open": None}, "open"),
    ],
)
def test_out_of_range_or_mistyped_fields_are_corrupt(changes: dict, problem: str) -> None:
    with pytest.raises(CorruptStateError, match=STREAM) as caught:
        StreamState.decode(_record(**changes), stream=STREAM)
    assert problem in caught.value.problem


def test_a_zlib_bomb_is_corrupt_without_inflating_it() -> None:
    import tracemalloc

    bomb = b"\x01" + zlib.compress(b"\x00" * (256 * 1024 * 1024), 9)
    tracemalloc.start()
    try:
        with pytest.raises(CorruptStateError, match="decompresses to more than"):
            StreamState.decode(bomb, stream=STREAM)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024 * 1024, f"peak {peak} bytes while decoding a zlib bomb"


@pytest.mark.parametrize(
    "data",
    [
        b"\x01" + zlib.compress(msgpack.packb(_GOOD_FIELDS))[:-3],  # truncated stream
        b"\x01" + zlib.compress(msgpack.packb(_GOOD_FIELDS)) + b"junk",  # trailing bytes
        b"\x00" + msgpack.packb(_GOOD_FIELDS) + b"\x00",  # trailing msgpack
        b"\x00" + b"\x81\x91\x01\x01",  # a map keyed by an array
        b"\x00\xc1",
    ],
)
def test_damaged_framing_is_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptStateError, match=STREAM):
        StreamState.decode(data, stream=STREAM)


# Written by the code before issue 12: the byte format did not change.
_V1_RECORDS = [
    (
        "0089a17601a673747265616daf6170702e73747265616d2e30303033a565706f636807a4736166652"
        "8a9636f6d6d697474656478a474696d65cf0000014d61558098a669676e6f72659295ae31302e302e"
        "302e317c6167656e74cd03e8cd07d0323195aa4dc3bc6e63687ce697a500cf0000e677d21fdbffcf7"
        "fffffffffffffff00a4626c6f62c4050075736572a46f70656e03",
        StreamState(
            STREAM,
            7,
            40,
            120,
            1_431_857_103_000,
            (
                IgnoreEntry("10.0.0.1|agent", 1000, 2000, 50, 49),
                IgnoreEntry("Münch|日", 0, MAX_EVENT_TIME_MS, MAX_OFFSET, 0),
            ),
            b"\x00user",
            3,
        ),
    ),
    (
        "0089a17601a673747265616daf6170702e73747265616d2e30303033a565706f636800a4736166650"
        "0a9636f6d6d697474656400a474696d65c0a669676e6f726590a4626c6f62c0a46f70656e00",
        StreamState(STREAM),
    ),
]


@pytest.mark.parametrize(("data", "state"), _V1_RECORDS)
def test_records_written_before_validation_still_decode_to_the_same_bytes(
    data: str, state: StreamState
) -> None:
    assert StreamState.decode(bytes.fromhex(data), stream=STREAM) == state
    assert state.encode() == bytes.fromhex(data)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"epoch": -1}, "epoch"),
        ({"safe_offset": 2**63, "committed_offset": 2**63}, "safe_offset"),
        ({"committed_offset": 1.0}, "committed_offset"),
        ({"open_sessions": -1}, "open_sessions"),
        ({"stream_time_ms": MAX_EVENT_TIME_MS + 1}, "stream_time_ms"),
        ({"stream_time_ms": 2**64}, "stream_time_ms"),
        ({"stream_time_ms": MIN_EVENT_TIME_MS - 1}, "stream_time_ms"),
        ({"user_blob": bytearray(b"x")}, "user_blob"),
        ({"user_blob": b"x" * (MAX_BLOB_BYTES + 1)}, "user_blob"),
        ({"ignore": [IgnoreEntry("k", 1, 2, 3, 3)]}, "ignore"),
        ({"ignore": (IgnoreEntry("k", 1, 2**63, 3, 3),)}, "ignore[0]: last_ts"),
        ({"ignore": (IgnoreEntry("\ud800", 1, 2, 3, 3),)}, "ignore[0]: key"),
        ({"ignore": (IgnoreEntry("k" * (MAX_KEY_BYTES + 1), 1, 2, 3, 3),)}, "ignore[0]: key"),
        ({"ignore": (IgnoreEntry("k", 1, 2, 3, 2**64),)}, "ignore[0]: tail_offset"),
        ({"format_version": 2}, "format_version"),
    ],
)
def test_a_state_msgpack_or_decode_would_refuse_cannot_be_built(changes: dict, field: str) -> None:
    with pytest.raises(ValueError, match=STREAM) as caught:
        StreamState(STREAM, **changes)
    assert field in str(caught.value)


def test_a_stream_name_msgpack_cannot_write_cannot_be_built() -> None:
    with pytest.raises(ValueError, match="stream name"):
        StreamState("bad\ud800")


def test_the_largest_state_of_every_field_encodes_and_round_trips() -> None:
    state = StreamState(
        STREAM,
        MAX_OFFSET,
        MAX_OFFSET,
        MAX_OFFSET,
        MAX_EVENT_TIME_MS,
        (IgnoreEntry("é" * (MAX_KEY_BYTES // 2), 0, MAX_EVENT_TIME_MS, MAX_OFFSET, MAX_OFFSET),),
        b"\xff" * MAX_BLOB_BYTES,
        MAX_OFFSET,
    )
    assert StreamState.decode(state.encode(), stream=STREAM) == state


def test_a_body_decode_would_refuse_to_inflate_is_too_large_to_write() -> None:
    entries = MAX_BODY_BYTES // 4000 + 1
    ignore = tuple(IgnoreEntry(f"{i:04}" + "k" * 3996, 1, 2, 3, 3) for i in range(entries))
    state = StreamState(STREAM, ignore=ignore)
    with pytest.raises(StateTooLargeError, match="uncompressed state is") as caught:
        state.encode()
    assert caught.value.limit == MAX_BODY_BYTES
