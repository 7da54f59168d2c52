"""A node's link to live resizes (`framework.node.resize_link`): registry records, sends."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kazoo.exceptions import ConnectionLoss, NoNodeError
from structlog.testing import capture_logs

from framework.kernel.records import StreamRecord
from framework.node.node import Node
from framework.node.resize import Outgoing, StreamResize
from framework.node.resize_link import ResizeLink, ZooKeeperResizeRecords, resize_line
from framework.node.task import StreamTask
from framework.testing.resize_cases import Members
from framework.testkit.memory import (
    FlushingSink,
    LocalCoordinator,
    MemoryLog,
    memory_parts,
    node_config,
    traffic_log,
)
from router.generator import generate_fragments
from router.resize_wire import Epoch, MigrationDone, ResizeMarker, encode_control
from sessionizer.examples.weblog import WebSessions
from state.record import StreamState
from state.store import VersionedMemory

EPOCH = Epoch(1, 2, 3)


@dataclass
class Records:
    stored: dict[str, StreamResize] = field(default_factory=dict)
    writes: list[tuple[str, StreamResize, dict[str, Any]]] = field(default_factory=list)

    def read(self, stream: str) -> StreamResize | None:
        return self.stored.get(stream)

    def write(
        self, stream: str, record: StreamResize, progress: dict[str, Any], *, quiet: bool = False
    ) -> None:
        self.stored[stream] = record
        self.writes.append((stream, record, progress))


@dataclass
class Sink:
    sent: list[Outgoing] = field(default_factory=list)

    def send(self, records: Sequence[Outgoing]) -> None:
        self.sent.extend(records)


def _control(stream: str, offset: int, record: Any) -> StreamRecord:
    key, value, headers, stamp = encode_control(record)
    return StreamRecord(stream, offset, key, value, stamp, headers)


def _start(stream: str, offset: int) -> StreamRecord:
    return _control(stream, offset, ResizeMarker(EPOCH, None, 0))


def test_a_gate_s_start_is_recorded_before_it_lets_the_safe_offset_pass() -> None:
    stream = "test.stream.0002"  # a new stream: a target
    records, sink = Records(), Sink()
    link = ResizeLink(records, sink)
    task = StreamTask.resume(Members(), StreamState.initial(stream))
    link.prepare(task)
    assert task.outgoing == [] and task.gate is None
    task.handle(_start(stream, 0))
    assert task.gate is not None and task.gate.holding == 0
    link.after(task)
    assert records.stored[stream] == StreamResize(EPOCH, 0, None)
    assert task.gate.wants_start is None and task.resize == records.stored[stream]


def test_a_task_resumed_past_its_epoch_knows_it_from_the_registry() -> None:
    stream = "test.stream.0000"  # an old stream: a source, its barrier behind it
    records = Records({stream: StreamResize(EPOCH, 5, 9)})
    link = ResizeLink(records, Sink())
    state = StreamState(stream, epoch=1, safe_offset=20, committed_offset=20)
    task = StreamTask.resume(Members(), state)
    link.prepare(task)
    assert task.gate is not None and task.gate.source is not None
    assert task.gate.source.barrier == 9 and task.gate.holding is None


def test_the_status_line_sums_the_streams() -> None:
    progress = {"from": 8, "to": 12, "epoch": 1, "migrated": 8, "sources": 8, "settled": 3}
    progress.update(targets=4, sessions_moved=30, held=2, held_total=41)
    assert resize_line(progress) == (
        "resize 8 -> 12 (epoch 1): 8/8 streams migrated, 3/4 settled, "
        "30 sessions moved, 41 records held back (2 still held)"
    )


class Unreadable(Records):
    """ZooKeeper does not answer for one stream's record."""

    def __init__(self, stream: str) -> None:
        super().__init__()
        self.stream = stream

    def read(self, stream: str) -> StreamResize | None:
        if stream == self.stream:
            raise ConnectionLoss()
        return super().read(stream)


def test_a_stream_whose_resize_record_cannot_be_read_is_given_up_not_run_blind() -> None:
    # A source stream past its barrier run without its record would emit sessions its
    # targets own: the node gives the stream up (to be taken again), the others run on.
    log = MemoryLog(traffic_log(list(generate_fragments(40, seed=5)), 2))
    bad, good = sorted(log.streams)
    sink, coordinators = FlushingSink(), []
    parts = memory_parts(log, sink, VersionedMemory(), log.caught_up, coordinators)
    link = ResizeLink(Unreadable(bad), Sink())
    with capture_logs() as logs:
        Node(node_config(), processor=WebSessions(), parts=parts, resize=link).run()
    assert coordinators[0].fenced == [bad]
    assert any(e["event"] == "resize_record_unreadable" and e["stream"] == bad for e in logs)
    streams = {s.session_id.rsplit(":", 2)[0] for s in sink.durable.sessions}
    assert streams == {good}


def test_a_target_that_settles_before_its_start_is_recorded_says_so_once() -> None:
    """The start is recorded after the batch that read it; a stream that settled in that
    batch logged `resize_settled` again at each later record until then."""
    stream = "test.stream.0002"  # a new stream: a target of the old streams 0 and 1
    task = StreamTask.resume(Members(), StreamState.initial(stream))
    link = ResizeLink(Records(), Sink())
    link.prepare(task)
    batch = [_start(stream, 0)] + [
        _control(stream, 1 + i, MigrationDone(EPOCH, f"test.stream.000{i}", 7, 0, 1_000))
        for i in range(2)
    ]
    batch.append(_control(stream, 3, ResizeMarker(EPOCH, None, 1)))  # a later record
    with capture_logs() as logs:
        for record in batch:
            task.handle(record)
        link.after(task)
    assert task.gate is not None and task.gate.target is not None and task.gate.target.settled
    assert [e["stream"] for e in logs if e["event"] == "resize_settled"] == [stream]


class FlakyZooKeeper:
    """Enough of a `KazooClient` for `ZooKeeperResizeRecords`: no record is stored yet, and
    the first write of `stream`'s record loses the connection (a ZooKeeper server restarts)."""

    def __init__(self, stream: str) -> None:
        self.stream = stream
        self.created: dict[str, bytes] = {}
        self.failed = False

    def get(self, path: str) -> tuple[bytes, object]:
        raise NoNodeError()

    def create(self, path: str, value: bytes, makepath: bool = False) -> None:
        if path.endswith(self.stream) and not self.failed:
            self.failed = True
            raise ConnectionLoss()
        self.created[path] = value

    def set(self, path: str, value: bytes) -> None:
        self.created[path] = value


def test_a_resize_record_lost_to_a_zookeeper_blip_gives_the_stream_up_not_the_node() -> None:
    # Each old stream reaches its barrier (the start marker: no named producer) and asks for
    # its record; ZooKeeper drops the connection at one write. The node crashed (exit 1, on
    # a chaos run's ZooKeeper leader restart); the stream's part is idempotent and derived
    # from its log, so the stream is given up without committing and taken again.
    log = traffic_log(list(generate_fragments(40, seed=5)), 2, end=False)
    for stream, records in log.items():
        records.append(_control(stream, len(records), ResizeMarker(Epoch(1, 2, 3), None, 0)))
    memory_log = MemoryLog(log)
    bad, good = sorted(log)
    zookeeper = FlakyZooKeeper(bad)
    config = node_config()
    registry = ZooKeeperResizeRecords(zookeeper, config.connection.paths)  # type: ignore[arg-type]
    coordinators: list[LocalCoordinator] = []
    parts = memory_parts(
        memory_log, FlushingSink(), VersionedMemory(), memory_log.caught_up, coordinators
    )
    link = ResizeLink(registry, Sink())
    with capture_logs() as logs:
        Node(config, processor=WebSessions(), parts=parts, resize=link).run()
    assert zookeeper.failed and coordinators[0].fenced == [bad]
    (unwritten,) = [e for e in logs if e["event"] == "resize_record_unwritten"]
    assert unwritten["stream"] == bad and "ConnectionLoss" in unwritten["error"]
    assert list(zookeeper.created) == [config.connection.paths.resize_stream(good)]
