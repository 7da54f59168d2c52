"""A release hands its streams over in one go: every record is sent before one wait for the
acknowledgements, then the pointers of the acknowledged ones are written together; a stream
whose record failed gets no pointer (its next owner replays), the others do.  The taker reads
every record with one reader."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import pytest
from kafka.errors import KafkaTimeoutError
from kazoo.exceptions import BadVersionError, NoNodeError, RolledBackError

from framework.kafka import consumer as kafka_settings
from framework.kafka.errors import ClientError
from framework.kafka.keyed_log import SEEK_PAST, ForwardRead
from framework.testing.handover_runs import after_polls, run_node, session_ids
from framework.testkit.memory import MemoryLog, traffic_log
from router.generator import generate_fragments
from state.errors import StateError
from state.handover import (
    HandoverPointer,
    HandoverRecord,
    HandoverStore,
    MemoryHandoverLog,
    MemoryPointers,
    Written,
)
from state.handover_kafka import KafkaHandoverLog, open_handover_log
from state.handover_zookeeper import ZooKeeperPointers
from state.store import VersionedMemory

STREAMS = 4
FRAGMENTS = list(generate_fragments(160, seed=11))
THREE = ["app.stream.0001", "app.stream.0002", "app.stream.0003"]


class RecordingLog(MemoryHandoverLog):
    """A `MemoryHandoverLog` that notes every call and refuses the streams it is told to."""

    def __init__(self, refuse: set[str] | None = None) -> None:
        super().__init__()
        self.refuse = refuse or set()
        self.calls: list[list[str]] = []
        self.reads: list[list[str]] = []

    def write_many(self, records: Sequence[tuple[str, bytes]], timeout: float) -> list[Written]:
        self.calls.append([stream for stream, _ in records])
        return super().write_many(records, timeout)

    def write(self, stream: str, data: bytes) -> int:
        if stream in self.refuse:
            raise StateError(f"stream {stream}: not acknowledged (told to)")
        return super().write(stream, data)

    def read_many(
        self, wanted: Mapping[str, int], timeout: float
    ) -> dict[str, bytes | StateError | None]:
        self.reads.append(list(wanted))
        return super().read_many(wanted, timeout)


class RecordingPointers(MemoryPointers):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[list[str]] = []
        self.reads: list[list[str]] = []

    def read_many(self, streams: Sequence[str]) -> dict[str, HandoverPointer | StateError | None]:
        self.reads.append(list(streams))
        return super().read_many(streams)

    def write_many(
        self, pointers: Mapping[str, HandoverPointer], timeout: float
    ) -> dict[str, StateError | None]:
        self.calls.append(list(pointers))
        return super().write_many(pointers, timeout)


def _records() -> list[HandoverRecord]:
    return [HandoverRecord(stream, 4, 100 + i, b"engine") for i, stream in enumerate(THREE)]


def test_put_many_writes_all_records_once_then_only_the_acknowledged_pointers() -> None:
    log, pointers = RecordingLog(refuse={THREE[1]}), RecordingPointers()
    outcomes = HandoverStore(log, pointers).put_many(_records())
    assert log.calls == [THREE], "one write of all three records"
    assert pointers.calls == [[THREE[0], THREE[2]]], "one write of the acknowledged pointers"
    assert isinstance(outcomes[THREE[1]], StateError) and pointers.read(THREE[1]) is None
    for stream in (THREE[0], THREE[2]):
        assert outcomes[stream] == pointers.read(stream)


# -- the transports: every send before the one flush ----------------------------------------


class FakeFuture:
    def __init__(self, offset: int | None, error: Exception | None = None) -> None:
        self.is_done = offset is not None or error is not None
        self.exception = error
        self.value = type("Metadata", (), {"offset": offset})()

    def failed(self) -> bool:
        return self.exception is not None


class FakeKafkaPythonProducer:
    """kafka-python's producer: `send` returns a future that the flush completes."""

    def __init__(self, outcomes: Mapping[str, FakeFuture]) -> None:
        self.outcomes = outcomes
        self.calls: list[str] = []

    def send(self, topic: str, *, key: bytes, value: bytes, partition: int) -> FakeFuture:
        self.calls.append(f"send {key.decode()}")
        return self.outcomes[key.decode()]

    def flush(self, timeout: float) -> None:
        self.calls.append("flush")
        raise KafkaTimeoutError("one record is still in flight")


def test_kafka_python_sends_every_record_before_one_flush() -> None:
    log = open_handover_log("kafka-python", "k:1", "app.handover", client_id="n1", properties={})
    producer = FakeKafkaPythonProducer(
        {
            THREE[0]: FakeFuture(7),
            THREE[1]: FakeFuture(None, KafkaTimeoutError("expired")),
            THREE[2]: FakeFuture(None),  # still in flight when the flush gave up
        }
    )
    log._log._producer = producer  # the client layer's producer, faked
    written = log.write_many([(stream, b"x") for stream in THREE], timeout=5.0)
    assert producer.calls == [f"send {stream}" for stream in THREE] + ["flush"]
    assert written[0] == 7
    assert isinstance(written[1], StateError) and "expired" in str(written[1])
    assert isinstance(written[2], StateError) and "not acknowledged" in str(written[2])


class FakeConfluentProducer:
    """confluent-kafka's producer: delivery callbacks are served by `flush`."""

    def __init__(self, refuse: str) -> None:
        self.refuse = refuse
        self.calls: list[str] = []
        self.pending: list[tuple[Callable[[Any, Any], None], str, int]] = []

    def produce(
        self,
        topic: str,
        *,
        key: bytes,
        value: bytes,
        partition: int,
        on_delivery: Callable[[Any, Any], None],
    ) -> None:
        self.calls.append(f"produce {key.decode()}")
        self.pending.append((on_delivery, key.decode(), len(self.pending)))

    def flush(self, timeout: float) -> int:
        self.calls.append("flush")
        for report, stream, offset in self.pending:
            message = type("Message", (), {"offset": lambda self, at=offset: at})()
            report("refused" if stream == self.refuse else None, message)
        return 0


def test_confluent_produces_every_record_before_one_flush() -> None:
    log = open_handover_log("confluent", "k:1", "app.handover", client_id="n1", properties={})
    producer = FakeConfluentProducer(refuse=THREE[1])
    log._log._producer = producer  # the client layer's producer, faked
    written = log.write_many([(stream, b"x") for stream in THREE], timeout=5.0)
    assert producer.calls == [f"produce {stream}" for stream in THREE] + ["flush"]
    assert written[0] == 0 and written[2] == 2, "offset 0 is an offset, not a failure"
    assert isinstance(written[1], StateError) and "refused" in str(written[1])


# -- the pointers: one pipelined read, one multi-operation -----------------------------------


class Pending:
    def __init__(self, value: Any = None, error: Exception | None = None) -> None:
        self.value, self.error = value, error

    def get(self, timeout: float | None = None) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


class FakeKazoo:
    """Registrations with versions: `get_async`, `transaction`, and the `get`/`set` fallback."""

    def __init__(self, streams: Sequence[str]) -> None:
        self.nodes = {s: (json.dumps({"topic": s}).encode(), 0) for s in streams}
        self.calls: list[str] = []
        self.race: str | None = None  # rewritten between our read and our multi-operation

    def _stat(self, version: int) -> Any:
        return type("Stat", (), {"version": version})()

    def get_async(self, path: str) -> Pending:
        self.calls.append("get_async")
        stream = path.rsplit("/", 1)[1]
        if stream not in self.nodes:
            return Pending(error=NoNodeError())
        data, version = self.nodes[stream]
        return Pending((data, self._stat(version)))

    def get(self, path: str) -> tuple[bytes, Any]:
        self.calls.append("get")
        data, version = self.nodes[path.rsplit("/", 1)[1]]
        return data, self._stat(version)

    def set(self, path: str, data: bytes, version: int) -> None:
        self.calls.append("set")
        stream = path.rsplit("/", 1)[1]
        if self.nodes[stream][1] != version:
            raise BadVersionError()
        self.nodes[stream] = (data, version + 1)

    def transaction(self) -> Any:
        kazoo, sets = self, []

        class Transaction:
            def set_data(self, path: str, data: bytes, version: int) -> None:
                sets.append((path.rsplit("/", 1)[1], data, version))

            def commit_async(self) -> Pending:
                kazoo.calls.append("multi")
                if kazoo.race is not None:
                    data, version = kazoo.nodes[kazoo.race]
                    kazoo.nodes[kazoo.race], kazoo.race = (data, version + 1), None
                if any(kazoo.nodes[s][1] != v for s, _, v in sets):
                    return Pending([RolledBackError() for _ in sets])
                for stream, data, version in sets:
                    kazoo.nodes[stream] = (data, version + 1)
                return Pending([kazoo._stat(v + 1) for _, _, v in sets])

        return Transaction()


def _pointers() -> dict[str, HandoverPointer]:
    return {s: HandoverPointer(4, 100 + i, i, 10, "ab") for i, s in enumerate(THREE)}


def test_zookeeper_pointers_go_in_one_multi_operation_and_keep_the_registration() -> None:
    zk = FakeKazoo([*THREE[:2], "app.stream.0009"])  # THREE[2] is not registered
    pointers = ZooKeeperPointers(zk, "/sessionizer/app/active_streams")  # type: ignore[arg-type]
    outcomes = pointers.write_many(_pointers(), timeout=5.0)
    assert zk.calls == ["get_async"] * 3 + ["multi"]
    assert outcomes[THREE[0]] is None and outcomes[THREE[1]] is None
    assert isinstance(outcomes[THREE[2]], StateError) and "not registered" in str(
        outcomes[THREE[2]]
    )
    for stream in THREE[:2]:
        assert pointers.read(stream) == _pointers()[stream]
        assert json.loads(zk.nodes[stream][0])["topic"] == stream


def test_a_registration_changed_meanwhile_is_written_alone() -> None:
    zk = FakeKazoo(THREE)
    zk.race = THREE[1]
    pointers = ZooKeeperPointers(zk, "/sessionizer/app/active_streams")  # type: ignore[arg-type]
    outcomes = pointers.write_many(_pointers(), timeout=5.0)
    assert outcomes == dict.fromkeys(THREE)
    assert all(pointers.read(stream) == _pointers()[stream] for stream in THREE)
    assert zk.calls[:4] == ["get_async"] * 3 + ["multi"]


# -- the node: one release, one write of the records ------------------------------------------


def test_a_stop_writes_its_records_in_one_go_and_a_refused_one_replays() -> None:
    log, memory = MemoryLog(traffic_log(FRAGMENTS, STREAMS)), VersionedMemory()
    probe = RecordingLog()
    first, _ = run_node(log, memory, HandoverStore(probe, RecordingPointers()), after_polls(6))
    assert first.handover.counts["written"] >= 2, "fewer than two open streams: no test"
    assert len(probe.calls) == 1 and len(probe.calls[0]) == first.handover.counts["written"]

    log, memory = MemoryLog(traffic_log(FRAGMENTS, STREAMS)), VersionedMemory()
    refused = probe.calls[0][0]
    handover_log, pointers = RecordingLog(refuse={refused}), RecordingPointers()
    store = HandoverStore(handover_log, pointers)
    first, first_sink = run_node(log, memory, store, after_polls(6))
    assert first.handover.counts["write_failed"] == 1
    assert pointers.read(refused) is None
    assert pointers.calls == [[s for s in handover_log.calls[0] if s != refused]]
    second, second_sink = run_node(log, memory, store, log.caught_up)
    assert second.handover.counts["used"] == first.handover.counts["written"]
    assert second.handover.counts["missing"] == 1 and second.handover.replayed > 0
    baseline_log = MemoryLog(traffic_log(FRAGMENTS, STREAMS))
    _, baseline = run_node(baseline_log, VersionedMemory(), store, baseline_log.caught_up)
    delivered = first_sink.sessions + second_sink.sessions
    assert sorted(set(session_ids(delivered))) == session_ids(baseline.sessions), (
        "a session lost or extra"
    )


def test_a_take_reads_every_pointer_in_one_go_and_every_record_in_one_pass() -> None:
    log, memory = MemoryLog(traffic_log(FRAGMENTS, STREAMS)), VersionedMemory()
    handover_log, pointers = RecordingLog(), RecordingPointers()
    store = HandoverStore(handover_log, pointers)
    run_node(log, memory, store, after_polls(6))
    written = set(handover_log.calls[0])
    assert len(written) >= 2, "fewer than two open streams: no test"
    assert pointers.reads == [] and handover_log.reads == []
    second, _ = run_node(log, memory, store, log.caught_up)
    assert second.handover.counts["used"] == len(written)
    assert [set(streams) for streams in pointers.reads] == [written], "one read of the pointers"
    assert [set(streams) for streams in handover_log.reads] == [written], "one pass of the log"
    assert set(pointers.notes) == set(log.streams), "every stream taken has its resume note"


# -- the taker: one reader for all the reads of a node ----------------------------------------


class FakeReader:
    """kafka-python's consumer over one partition: `seek`, then `poll` returns from there."""

    created: list[FakeReader] = []

    def __init__(self, records: Sequence[tuple[str, bytes]]) -> None:
        self.records = records
        self.position = 0
        self.seeks: list[int] = []
        self.closed = False
        FakeReader.created.append(self)

    def assign(self, partitions: list[Any]) -> None:
        self.partition = partitions[0]

    def seek(self, partition: Any, offset: int) -> None:
        self.position = offset
        self.seeks.append(offset)

    def poll(self, timeout_ms: int) -> dict[Any, list[Any]]:
        found = [
            SimpleNamespace(offset=at, key=stream.encode(), value=data)
            for at, (stream, data) in enumerate(self.records)
            if self.position <= at < self.position + 100  # a fetch's worth
        ]
        self.position += len(found)
        return {self.partition: found}

    def close(self) -> None:
        self.closed = True


def test_kafka_python_reads_every_record_with_one_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    records = [(stream, f"record of {stream}".encode()) for stream in THREE]
    FakeReader.created, settings = [], []
    monkeypatch.setattr(
        kafka_settings,
        "assigned_consumer",
        lambda *args, **kwargs: settings.append(kwargs) or FakeReader(records),
    )
    log = open_handover_log("kafka-python", "k:1", "app.handover", client_id="n1", properties={})
    for offset in (2, 0, 1):
        assert log.read_many({THREE[offset]: offset}, 5.0) == {THREE[offset]: records[offset][1]}
    assert log.read_many({THREE[0]: 1}, 5.0) == {THREE[0]: None}, "another stream's record there"
    assert len(FakeReader.created) == 1 and not FakeReader.created[0].closed
    assert settings[0]["fetch_max_wait_ms"] <= 50, "each read would wait out a held fetch"
    log.close()
    assert FakeReader.created[0].closed


class FakeConfluentReader:
    """confluent-kafka's consumer over one partition: `assign` at an offset, `poll` one message."""

    created: list[FakeConfluentReader] = []

    def __init__(self, config: dict[str, Any], records: Sequence[tuple[str, bytes]]) -> None:
        self.config, self.records = config, records
        self.position: int | None = None
        self.assigned: list[int] = []
        self.closed = False
        FakeConfluentReader.created.append(self)

    def assign(self, partitions: list[Any]) -> None:
        self.position = partitions[0].offset
        self.assigned.append(partitions[0].offset)

    def unassign(self) -> None:
        self.position = None  # a real one would otherwise keep fetching in the background

    def poll(self, timeout: float) -> Any:
        assert self.position is not None, "polled while unassigned"
        at = self.position
        if at >= len(self.records):
            return None  # nothing more within the timeout
        self.position += 1
        stream, data = self.records[at]
        return SimpleNamespace(
            error=lambda: None, offset=lambda: at, key=lambda: stream.encode(), value=lambda: data
        )

    def close(self) -> None:
        self.closed = True


def test_confluent_reads_every_record_with_one_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    import framework.kafka.confluent_log as confluent_kafka  # where the reader is made

    records = [(stream, f"record of {stream}".encode()) for stream in THREE]
    FakeConfluentReader.created = []
    monkeypatch.setattr(
        confluent_kafka, "Consumer", lambda config: FakeConfluentReader(config, records)
    )
    log = open_handover_log("confluent", "k:1", "app.handover", client_id="n1", properties={})
    for offset in (2, 0, 1):
        assert log.read_many({THREE[offset]: offset}, 5.0) == {THREE[offset]: records[offset][1]}
    [reader] = FakeConfluentReader.created
    assert reader.position is None, "left assigned between reads"
    assert reader.config["fetch.wait.max.ms"] <= 50, "each read would wait out a held fetch"
    log.close()
    assert reader.closed


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_many_records_are_read_forward_in_one_pass_seeking_only_past_a_long_gap(
    client: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import framework.kafka.confluent_log as confluent_kafka  # where the reader is made

    records = [(THREE[at % 3], f"record {at}".encode()) for at in range(600)]
    FakeReader.created, FakeConfluentReader.created = [], []
    monkeypatch.setattr(kafka_settings, "assigned_consumer", lambda *a, **k: FakeReader(records))
    monkeypatch.setattr(
        confluent_kafka, "Consumer", lambda config: FakeConfluentReader(config, records)
    )
    log = open_handover_log(client, "k:1", "app.handover", client_id="n1", properties={})
    wanted = {THREE[2]: 599, THREE[1]: 1, THREE[0]: 0}  # 599: more than SEEK_PAST past 1
    assert log.read_many(wanted, timeout=5.0) == {
        s: f"record {at}".encode() for s, at in wanted.items()
    }
    [reader] = FakeReader.created or FakeConfluentReader.created
    assert (reader.seeks if client == "kafka-python" else reader.assigned) == [0, 599]
    assert log.read_many({THREE[0]: 1}, timeout=5.0) == {THREE[0]: None}, "another stream's"
    log.close()


def test_a_forward_read_answers_each_offset_with_the_first_record_at_or_after_it() -> None:
    wanted = ForwardRead([900, 5, 6, 5])
    assert wanted.position == 5 and not wanted.done
    wanted.see(4, b"k", b"before")  # fetched before the seek: answers nothing
    wanted.see(5, b"k", b"five")
    assert wanted.seek_from(5) is None, "6 is next: read on"
    wanted.see(7, b"k", b"seven")  # 6 was compacted away: the first record after it
    assert wanted.found == {5: (5, b"k", b"five"), 6: (7, b"k", b"seven")}
    assert wanted.seek_from(7) == 900 and wanted.seek_from(900 - SEEK_PAST) is None
    wanted.see(903, None, None)
    assert wanted.done and wanted.found[900] == (903, None, None)


def test_a_reader_that_fails_leaves_every_stream_unread_and_each_one_replays() -> None:
    class BrokenLog:  # the client layer's keyed log, its reader failing mid-pass
        topic = "app.handover"

        def read_many(self, offsets: Sequence[int], timeout: float) -> dict[int, Any]:
            raise ClientError("record unreadable (broker gone)", client_class="KafkaError")

    log = KafkaHandoverLog(BrokenLog())  # type: ignore[arg-type]
    outcomes = log.read_many({THREE[0]: 3, THREE[1]: 4}, 1.0)
    for stream in THREE[:2]:
        assert isinstance(outcomes[stream], StateError) and stream in str(outcomes[stream])
    pointers = MemoryPointers()
    for offset, stream in enumerate(THREE[:2]):
        pointers.write(stream, HandoverPointer(5, 900, offset + 3, 10, "00"))
    fetched = HandoverStore(log, pointers).fetch_many({s: (5, 900) for s in THREE[:2]})
    assert {s: f.reason for s, f in fetched.items()} == dict.fromkeys(THREE[:2], "unreadable")
