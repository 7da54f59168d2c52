"""A node's link to live resizes (docs/resize.md): the registry records and a record sender.

The loop's tasks decide everything from their logs (`framework.node.resize`); beside
the loop a node must

- tell each task it resumes what the registry says of its stream
  (`resize/<stream>`, `StreamTask.know_resize`), and give it a list for the records
  it writes to other streams (`task.outgoing`);
- send those records after each batch of records it applied, and wait for the
  brokers' acknowledgement there and then: a migration is acknowledged before the
  checkpoint can commit its source past the barrier (a failure is the crash path:
  nothing more is committed);
- write what a gate asks the registry to hold (`ResizeGate.wants_start`), and tell
  it (`start_recorded`): only then may its stream's safe offset pass the epoch's start.
  A write ZooKeeper does not confirm gives the stream up (without committing, to be
  taken again): its part is derived from its log, so a replay writes it again.

`open_link` builds one over the node's ZooKeeper client (`framework.node.parts`) and a
Kafka producer of its own; `ResizeLink` takes any `ResizeRecords` and `RecordSink`
(tests pass in-memory ones).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any, Protocol

import structlog
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError

from framework.kafka.errors import ClientError
from framework.kafka.producer import RecordProducer, open_producer
from framework.kernel.errors import InvalidArgument, SessionizerError
from framework.kernel.paths import AppPaths
from framework.kernel.safe_json import loads_object
from framework.node.config import NodeConfig
from framework.node.resize import Outgoing, StreamResize
from framework.node.task import StreamTask
from router.naming import stream_name
from router.producer import ProducerConfig
from router.resize import read_resize
from router.resize_wire import Epoch

__all__ = [
    "PUBLISH_EVERY_S",
    "KafkaRecordSink",
    "RecordSink",
    "ResizeLink",
    "ResizeRecordUnwritten",
    "ResizeRecords",
    "ResizeSendFailed",
    "ZooKeeperResizeRecords",
    "open_link",
    "resize_line",
    "resize_progress",
]

_log = structlog.get_logger("sessionizer.resize")
_SEND_TIMEOUT_S = 30.0
PUBLISH_EVERY_S = 1.0
"""A stream's progress in a resize is written to the registry at most this often."""


class ResizeSendFailed(SessionizerError):
    """Records a stream writes to another stream were not acknowledged (the node stops)."""


class ResizeRecordUnwritten(SessionizerError):
    """ZooKeeper did not confirm a stream's resize record (its owner gives the stream up)."""


class ResizeRecords(Protocol):
    """Where each stream's part in the latest resize is recorded (`resize/<stream>`)."""

    def read(self, stream: str) -> StreamResize | None:
        """The stream's record, None if it has none (or it cannot be read as one)."""

    def write(
        self, stream: str, record: StreamResize, progress: dict[str, Any], *, quiet: bool = False
    ) -> None:
        """Store the stream's record, with its progress for `status` (`quiet`: an update);
        raise `ResizeRecordUnwritten` if that is not confirmed."""


class RecordSink(Protocol):
    """Sends records to other streams and waits for their acknowledgement."""

    def send(self, records: Sequence[Outgoing]) -> None:
        """All acknowledged on return; raise `ResizeSendFailed` otherwise."""


class ResizeLink:
    """What a node does for live resizes beside its loop (see the module docstring)."""

    def __init__(self, records: ResizeRecords, sink: RecordSink) -> None:
        self.records = records
        self.sink = sink
        self.sent = 0
        self._published: dict[str, tuple[dict[str, Any], float]] = {}

    def prepare(self, task: StreamTask) -> bool:
        """A task just resumed: it learns its stream's record, and may write to others.

        False if the record cannot be read: the stream must not run then (a source past
        its barrier would emit what its targets own), and the caller gives it up for now.
        """
        task.outgoing = []
        try:
            task.know_resize(self.records.read(task.stream))
        except KazooException as exc:
            _log.warning(
                "resize_record_unreadable",
                stream=task.stream,
                error=str(exc),
                note="stream given up; it is taken again once ZooKeeper answers",
            )
            return False
        return True

    def after(self, task: StreamTask) -> bool:
        """After a batch of the task's records: send what it wrote, record what it asks.

        False if ZooKeeper did not confirm the record: the caller gives the stream up
        without committing, as when `prepare` cannot read it.
        """
        outgoing = task.outgoing
        if outgoing:
            self.sink.send(outgoing)
            self.sent += len(outgoing)
            outgoing.clear()
        try:
            self._write_record(task)
        except ResizeRecordUnwritten as exc:
            self._published.pop(task.stream, None)
            _log.warning(
                "resize_record_unwritten",
                stream=task.stream,
                error=str(exc),
                note="stream given up without committing; it is taken again and replayed",
            )
            return False
        return True

    def _write_record(self, task: StreamTask) -> None:
        gate = task.gate
        wanted = gate.wants_start if gate is not None else None
        if gate is not None and wanted is not None:
            progress = gate.progress()
            self.records.write(task.stream, wanted, progress)
            self._published[task.stream] = (progress, time.monotonic())
            gate.start_recorded(wanted)
            task.resize = wanted
        elif gate is not None and gate.start is not None:
            self._publish(task)

    def _publish(self, task: StreamTask) -> None:
        """The progress of a stream that went through the epoch here: at once when it
        settles, else its counts at most once a second."""
        gate, record, now = task.gate, task.resize, time.monotonic()
        last = self._published.get(task.stream)
        if gate is None or record is None or record.epoch != gate.epoch:
            return
        target = gate.target
        settling = target is not None and target.settled and not (last and last[0].get("settled"))
        if last is not None and now - last[1] < PUBLISH_EVERY_S and not settling:
            return
        progress = gate.progress()
        if last is None or progress != last[0]:
            self.records.write(task.stream, record, progress, quiet=True)
        self._published[task.stream] = (progress, now)


class ZooKeeperResizeRecords:
    """`ResizeRecords` in ZooKeeper: JSON `{"epoch", "from", "to", "start", "barrier", ...}`."""

    def __init__(self, client: KazooClient, paths: AppPaths) -> None:
        self._client, self._paths = client, paths

    def read(self, stream: str) -> StreamResize | None:
        """The stream's record (None: none, or not one)."""
        try:
            raw, _stat = self._client.get(self._paths.resize_stream(stream))
        except NoNodeError:
            return None
        return _record(loads_object(raw) if raw else None)

    def write(
        self, stream: str, record: StreamResize, progress: dict[str, Any], *, quiet: bool = False
    ) -> None:
        """Create or replace the stream's record."""
        epoch = record.epoch
        data = {**progress, "epoch": epoch.epoch, "from": epoch.old, "to": epoch.new}
        data.update(start=record.start, barrier=record.barrier)
        path, value = self._paths.resize_stream(stream), json.dumps(data).encode()
        try:
            try:
                self._client.create(path, value, makepath=True)
            except NodeExistsError:
                self._client.set(path, value)
        except KazooException as exc:
            error = f"{type(exc).__name__}: {exc}".rstrip(": ")
            raise ResizeRecordUnwritten(f"stream {stream}: recording {path}: {error}") from exc
        if not quiet:
            _log.info("resize_recorded", stream=stream, epoch=epoch.epoch, start=record.start)


class KafkaRecordSink:
    """`RecordSink` over the client layer's producer (acks=all, idempotent), opened at the
    first send: a node that never takes part in a resize never opens it."""

    def __init__(self, open_client: Callable[[], RecordProducer]) -> None:
        self._open = open_client
        self._producer: RecordProducer | None = None

    def close(self) -> None:
        """Close the producer, if it was opened."""
        if self._producer is not None:
            self._producer.close(5.0)

    def send(self, records: Sequence[Outgoing]) -> None:
        """Send and flush; any failure raises `ResizeSendFailed`."""
        try:
            if self._producer is None:
                self._producer = self._open()
            for record in records:
                self._producer.send(
                    record.topic,
                    record.key,
                    record.value,
                    headers=record.headers,
                    partition=0,
                    timestamp_ms=record.timestamp_ms,
                )
            failures = self._producer.flush(_SEND_TIMEOUT_S)
        except ClientError as exc:
            raise ResizeSendFailed(f"sending {len(records)} resize records failed: {exc}") from exc
        if failures:
            raise ResizeSendFailed(f"{len(failures)} resize records failed: {failures[:3]}")


@contextmanager
def open_link(config: NodeConfig, client: KazooClient) -> Iterator[ResizeLink]:
    """A link over the node's ZooKeeper `client` (its session: one per node) and a Kafka
    producer of its own, closed on exit."""
    connection = config.connection
    settings = ProducerConfig(
        connection.bootstrap,
        connection.app,
        1,
        kafka_config=connection.kafka_config,
        kafka_client=connection.kafka_client,
    )
    with ExitStack() as stack:
        sink = KafkaRecordSink(
            lambda: open_producer(
                connection.kafka_client,
                kafka_python=settings.kafka_settings,
                confluent=settings.confluent_settings,
            )
        )
        stack.callback(sink.close)
        records = ZooKeeperResizeRecords(client, connection.paths)
        yield ResizeLink(records, sink)


def resize_progress(client: KazooClient, paths: AppPaths) -> dict[str, Any] | None:
    """The latest resize and how far it got (for `status`), None if the app had none.

    `migrated`: old streams past their barrier; `settled`: new streams settled;
    `sessions_moved`, `fragments_moved`, `held` (held back now), `held_total` (held back
    since the targets' owners started), `forwarded`: summed over
    the streams' records; `streams`: each stream's record.
    """
    epoch = read_resize(client, paths.active_streams)
    if epoch is None:
        return None
    try:
        names = client.get_children(paths.resizes)
    except NoNodeError:
        names = []
    streams: dict[str, dict[str, Any]] = {}
    for name in sorted(names):
        try:
            raw, _stat = client.get(paths.resize_stream(name))
        except NoNodeError:
            continue
        data = loads_object(raw) if raw else None
        if data is not None and data.get("epoch") == epoch.epoch:
            streams[name] = data
    sources = [stream_name(paths.app, i) for i in epoch.sources()]
    targets = [stream_name(paths.app, i) for i in epoch.targets()]
    of_sources = [streams[s] for s in sources if s in streams]
    of_targets = [streams[t] for t in targets if t in streams]
    return {
        "epoch": epoch.epoch,
        "from": epoch.old,
        "to": epoch.new,
        "sources": len(sources),
        "migrated": sum(isinstance(d.get("barrier"), int) for d in of_sources),
        "targets": len(targets),
        "settled": sum(d.get("settled") is True for d in of_targets),
        "sessions_moved": sum(_count(d, "sessions") for d in of_sources),
        "fragments_moved": sum(_count(d, "fragments") for d in of_sources),
        "held": sum(_count(d, "held") for d in of_targets),
        "held_total": sum(_count(d, "held_total") for d in of_targets),
        "forwarded": sum(_count(d, "forwarded") for d in of_sources),
        "streams": streams,
    }


def resize_line(progress: dict[str, Any]) -> str:
    """One line of `status`'s table about the latest resize."""
    return (
        f"resize {progress['from']} -> {progress['to']} (epoch {progress['epoch']}): "
        f"{progress['migrated']}/{progress['sources']} streams migrated, "
        f"{progress['settled']}/{progress['targets']} settled, "
        f"{progress['sessions_moved']} sessions moved, {progress.get('held_total', 0)} records "
        f"held back ({progress['held']} still held)"
    )


def _count(data: dict[str, Any], name: str) -> int:
    value = data.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _record(data: dict[str, Any] | None) -> StreamResize | None:
    if not data:
        return None
    values = [data.get(name) for name in ("epoch", "from", "to", "start")]
    numbers = [v for v in values if isinstance(v, int) and not isinstance(v, bool) and v >= 0]
    barrier = data.get("barrier")
    if len(numbers) != 4 or not (barrier is None or isinstance(barrier, int)):
        return None
    try:
        epoch = Epoch(numbers[0], numbers[1], numbers[2])
    except InvalidArgument:
        return None
    return StreamResize(epoch, numbers[3], barrier)
