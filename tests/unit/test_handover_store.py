"""`state.handover`: the record's codec, the pointer, and every way `fetch` refuses a record."""

from __future__ import annotations

import json
import zlib
from typing import Any

import msgpack
import pytest
from kazoo.exceptions import BadVersionError, NoNodeError
from prometheus_client import generate_latest

from framework.node.metrics import HandoverMetrics, NodeMetrics
from framework.testing.settled import Settled
from state.errors import StateError
from state.handover import (
    HandoverMissing,
    HandoverPointer,
    HandoverRecord,
    HandoverStore,
    MemoryHandoverLog,
    MemoryPointers,
    checksum,
)
from state.handover_zookeeper import ZooKeeperPointers

STREAM = "app.stream.0002"


def _store() -> tuple[HandoverStore, MemoryHandoverLog, MemoryPointers]:
    log, pointers = MemoryHandoverLog(), MemoryPointers()
    return HandoverStore(log, pointers), log, pointers


@pytest.mark.parametrize("size", [10, 100_000])
def test_a_record_round_trips_plain_and_compressed(size: int) -> None:
    record = HandoverRecord(STREAM, 7, 1234, b"e" * size)
    data = record.encode()
    assert data[0] == (0x01 if size > 4096 else 0x00)
    assert HandoverRecord.decode(data, stream=STREAM) == record


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x07junk",
        b"\x00" + b"\xc1",
        b"\x01not zlib",
        b"\x00" + msgpack.packb({"v": 1}),
        b"\x00"
        + msgpack.packb({"v": 2, "stream": STREAM, "epoch": 1, "committed": 1, "engine": b""}),
        b"\x00"
        + msgpack.packb({"v": 1, "stream": "other", "epoch": 1, "committed": 1, "engine": b""}),
        b"\x00"
        + msgpack.packb({"v": 1, "stream": STREAM, "epoch": 1, "committed": 1, "engine": 3}),
        b"\x01" + zlib.compress(b"\x00" * (65 * 1024 * 1024)),
    ],
)
def test_anything_but_a_record_of_the_stream_is_corrupt(data: bytes) -> None:
    with pytest.raises(HandoverMissing) as raised:
        HandoverRecord.decode(data, stream=STREAM)
    assert raised.value.reason == "corrupt" and STREAM in str(raised.value)


def test_put_then_fetch_returns_the_record_for_that_epoch_and_offset_only() -> None:
    store, _, pointers = _store()
    record = HandoverRecord(STREAM, 5, 900, b"engine")
    pointer = store.put(record)
    assert pointer == pointers.read(STREAM)
    assert pointer.checksum == checksum(record.encode()) and pointer.size == len(record.encode())
    assert store.fetch(STREAM, 5, 900) == record
    for epoch, committed in [(6, 900), (5, 901), (4, 900)]:
        with pytest.raises(HandoverMissing) as raised:
            store.fetch(STREAM, epoch, committed)
        assert raised.value.reason == "stale"
    with pytest.raises(HandoverMissing) as raised:
        store.fetch("app.stream.0009", 5, 900)
    assert raised.value.reason == "missing"


def test_a_record_that_does_not_match_its_pointer_is_corrupt_and_a_lost_one_missing() -> None:
    store, log, _ = _store()
    store.put(HandoverRecord(STREAM, 5, 900, b"engine"))
    stream, data = log.records[0]
    log.records[0] = (stream, data[:-1] + b"X")
    with pytest.raises(HandoverMissing, match="checksum") as raised:
        store.fetch(STREAM, 5, 900)
    assert raised.value.reason == "corrupt"
    log.records[0] = ("another.stream", data)  # compacted away; another stream's record there
    with pytest.raises(HandoverMissing) as raised:
        store.fetch(STREAM, 5, 900)
    assert raised.value.reason == "missing"


class FailingLog(MemoryHandoverLog):
    def write(self, stream: str, data: bytes) -> int:
        raise StateError(f"stream {stream}: not acknowledged (told to)")

    def read(self, stream: str, offset: int, timeout: float) -> bytes | None:
        raise StateError(f"stream {stream}: read timed out (told to)")


def test_no_pointer_is_written_when_the_record_is_not_acknowledged() -> None:
    pointers = MemoryPointers()
    store = HandoverStore(FailingLog(), pointers)
    with pytest.raises(StateError):
        store.put(HandoverRecord(STREAM, 5, 900, b"engine"))
    assert pointers.read(STREAM) is None
    pointers.write(STREAM, HandoverPointer(5, 900, 0, 10, "00"))
    with pytest.raises(HandoverMissing) as raised:
        store.fetch(STREAM, 5, 900)
    assert raised.value.reason == "unreadable"


def test_a_pointer_that_is_not_one_reads_as_none() -> None:
    assert HandoverPointer.from_json(None) is None
    assert HandoverPointer.from_json({"epoch": 1}) is None
    assert (
        HandoverPointer.from_json(
            {"epoch": "x", "committed": 1, "offset": 1, "size": 1, "checksum": ""}
        )
        is None
    )


class FakeZooKeeper:
    """`get` / `set` with versions, and one concurrent rewrite on demand."""

    def __init__(self, data: bytes) -> None:
        self.data, self.version = data, 0
        self.race = False
        self.multis = 0

    def get(self, path: str) -> tuple[bytes, Any]:
        if path.endswith("missing"):
            raise NoNodeError()
        return self.data, type("Stat", (), {"version": self.version})()

    def set(self, path: str, data: bytes, version: int) -> None:
        if self.race:  # someone rewrote the registration between our get and set
            self.race, self.version = False, self.version + 1
        if version != self.version:
            raise BadVersionError()
        self.data, self.version = data, self.version + 1

    def get_async(self, path: str) -> Settled:
        return Settled(lambda: self.get(path))

    def transaction(self) -> FakeTransaction:
        return FakeTransaction(self)


class FakeTransaction:
    """A multi-operation of `set_data`s on the fake's one registration: all or nothing."""

    def __init__(self, zk: FakeZooKeeper) -> None:
        self.zk, self.sets = zk, []  # type: ignore[var-annotated]

    def set_data(self, path: str, data: bytes, version: int) -> None:
        self.sets.append((path, data, version))

    def commit_async(self) -> Settled:
        def commit() -> list[Any]:
            self.zk.multis += 1
            if self.zk.race:
                self.zk.race, self.zk.version = False, self.zk.version + 1
            if any(version != self.zk.version for _, _, version in self.sets):
                return [BadVersionError() for _ in self.sets]
            for _, data, _ in self.sets:
                self.zk.set("registration", data, self.zk.version)
            return [type("Stat", (), {"version": self.zk.version})() for _ in self.sets]

        return Settled(commit)


def test_the_pointer_lives_beside_the_registration_and_keeps_its_fields() -> None:
    zk = FakeZooKeeper(json.dumps({"topic": STREAM, "created": 1}).encode())
    pointers = ZooKeeperPointers(zk, "/sessionizer/app/active_streams")  # type: ignore[arg-type]
    pointer = HandoverPointer(3, 40, 12, 300, "ab")
    zk.race = True
    pointers.write(STREAM, pointer)
    assert pointers.resumed_many({STREAM: {"node": "n1", "handover": True, "replayed": 0}}, 5) == {
        STREAM: None
    }
    fields = json.loads(zk.data)
    assert fields["topic"] == STREAM and fields["created"] == 1
    assert fields["resumed"] == {"node": "n1", "handover": True, "replayed": 0}
    assert pointers.read(STREAM) == pointer
    assert pointers.read("app.stream.missing") is None
    with pytest.raises(StateError, match="not registered"):
        pointers.write("app.stream.missing", pointer)


def test_resume_notes_go_in_one_multi_operation_and_a_raced_one_is_written_alone() -> None:
    zk = FakeZooKeeper(json.dumps({"topic": STREAM, "created": 1}).encode())
    pointers = ZooKeeperPointers(zk, "/sessionizer/app/active_streams")  # type: ignore[arg-type]
    note = {"node": "n2", "handover": False, "replayed": 7}
    outcomes = pointers.resumed_many({STREAM: note, "app.stream.missing": note}, 5)
    assert outcomes[STREAM] is None and zk.multis == 1
    assert "not registered" in str(outcomes["app.stream.missing"])
    assert json.loads(zk.data) == {"topic": STREAM, "created": 1, "resumed": note}
    zk.race = True  # rewritten between the read and the multi-operation: read again, then set
    again = {"node": "n3", "handover": True, "replayed": 0}
    assert pointers.resumed_many({STREAM: again}, 5) == {STREAM: None} and zk.multis == 2
    assert json.loads(zk.data)["resumed"] == again


def test_the_metrics_count_replayed_records_and_outcomes() -> None:
    metrics = NodeMetrics("n1")
    handovers = HandoverMetrics.register(metrics)
    handovers.count("n1", "used")
    handovers.count("n1", "stale", replayed=42)
    text = generate_latest(metrics.registry).decode()
    assert 'sessionizer_records_replayed_total{node="n1"} 42.0' in text
    assert 'sessionizer_handovers_total{node="n1",outcome="used"} 1.0' in text
    assert 'sessionizer_handovers_total{node="n1",outcome="stale"} 1.0' in text
