"""`Node`: one process, one loop thread, one record source, one engine per owned stream.

The loop reads: poll (apply coordinator events: `Coordinator.poll` calls this
node's listener methods on this thread), hand the records of the owned streams
to their tasks, deliver their output, checkpoint.  The order of flushes, state
commits, rewinds, fencing, the at-most-once hold and the handover write is the
`framework.node.checkpoint.Checkpoint`'s, its steps numbered there.  kazoo
callbacks never reach this class directly; signal handlers only call `stop()`.

The guarantees, each unit-tested with fakes of the four parts
(`tests/unit/test_node_loop.py`):

- no commit covers output the sink did not confirm: a failed send or flush
  rewinds every stream that had output since the last good flush to its last
  commit (`Checkpoint`);
- an unexpected exception commits nothing: the streams are dropped, released,
  and `run` raises `NodeCrashed`;
- a stream whose state or position cannot be trusted is quarantined, never
  reset or retried in a loop;
- no record is skipped: every record the source fetched is applied or read
  again, and one past its stream's position is refused and the stream re-read
  (`framework.node.gaps`; `tests/unit/test_node_gaps.py`);
- a stop is bounded: while the coordinator is paused the node waits at most a
  session timeout for it, then leaves without committing.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from contextlib import ExitStack
from typing import Any

import structlog

from balancer.fencing import StreamLease
from balancer.machine import BalancerState
from framework.kernel.errors import ConfigError, SessionizerError
from framework.node.checkpoint import Checkpoint
from framework.node.config import NodeConfig
from framework.node.deliveries import Deliveries
from framework.node.errors import NodeCrashed
from framework.node.gaps import OffsetGaps
from framework.node.handover import NodeHandover
from framework.node.loader import load_processor
from framework.node.loop_watch import LoopWatch
from framework.node.metrics import HandoverMetrics, LoopHealth, MetricsServer, NodeMetrics
from framework.node.parts import NodeParts, connect_parts
from framework.node.ports import Coordinator, Fetched, RecordSource, SourceRecord
from framework.node.resize_link import ResizeLink
from framework.node.stats import NodeStats, load_counts, metrics_snapshot
from framework.node.streams import OwnedStreams
from framework.node.task import StreamTask
from sessionizer.processor import StreamProcessor
from state.errors import CorruptStateError, StateError
from state.record import StreamState
from state.store import StateStore

__all__ = ["Node"]

log = structlog.get_logger("sessionizer.node")
_DONE = (BalancerState.DRAINED, BalancerState.CLOSED)


class Node:
    """A consumer node; `run()` blocks until `stop()` and then leaves within a deadline."""

    def __init__(
        self,
        config: NodeConfig,
        *,
        processor: StreamProcessor[Any] | None = None,
        parts: NodeParts | None = None,
        resize: ResizeLink | None = None,
    ) -> None:
        if processor is None and not config.processor:
            raise ConfigError("a node needs a processor: pass one, or set --processor")
        self.config = config
        self.processor = processor or load_processor(config.processor)
        self.stats = NodeStats()
        self._parts = parts
        self._link = resize  # live resizes (docs/resize.md); opened with real parts
        self._tasks: dict[str, StreamTask] = {}
        self._stop = threading.Event()
        self._log = log.bind(node=config.node_id)
        self._source: RecordSource | None = None
        self._store: StateStore | None = None
        self._coordinator: Coordinator | None = None
        self._out: Deliveries | None = None
        self._owned: OwnedStreams | None = None
        self._checkpoint: Checkpoint | None = None
        self.metrics: NodeMetrics | None = None
        self._health = LoopHealth(config.stall_limit, self._stop)
        self._last_publish = 0.0
        self._metrics_port = 0
        self.handover = NodeHandover(None, config.node_id, self._log, None)
        self._busy_seconds = 0.0  # time spent consuming records, for the published loads
        self._last_load_report = 0.0
        self._gaps = OffsetGaps(self.stats, self._log)

    @property
    def metrics_port(self) -> int:
        """The port `/metrics` is served on (0 until `run` started serving)."""
        return self._metrics_port

    @property
    def streams(self) -> list[str]:
        """The streams this node owns now."""
        return sorted(self._tasks)

    def stop(self) -> None:
        """Ask the loop to stop (safe from a signal handler or another thread)."""
        self._stop.set()

    # -- lifecycle -----------------------------------------------------------------

    def run(self) -> None:
        """Join, consume until stopped, then commit and release (or drain) and return."""
        with ExitStack() as stack:
            self._assemble(self._parts or stack.enter_context(connect_parts(self.config)), stack)
            assert self._coordinator is not None
            self._health.beat()  # connecting is not a loop step
            health = self._health
            stack.enter_context(LoopWatch(lambda: health.last_step, health.stall_limit, self._log))
            self._coordinator.start()
            self._log.info("node_started", app=self.config.connection.app)
            try:
                self._loop_until_stopped()
                self._leave()
            except ConfigError as exc:  # a setting the app refuses (MembersDisagree...): no crash
                self._log.error("node_refused", error=str(exc), streams=self.streams)
                self._drop(list(self._tasks), reassign=False)  # as a crash: nothing committed
                raise
            except Exception as exc:
                self._crash(exc)
                raise NodeCrashed(self.config.node_id, exc) from exc
            except BaseException as exc:  # KeyboardInterrupt, SystemExit: still no commit
                self._crash(exc)
                raise
            finally:
                self._close_coordinator()
        if self.metrics is not None:
            self._publish()  # the final counts, for whoever reads `metrics` after `run`
        self._log.info("node_stopped", **self.stats.totals(self._tasks.values()))

    def _assemble(self, parts: NodeParts, stack: ExitStack) -> None:
        """Build the loop's collaborators over the four parts (and `/metrics`, if asked)."""
        self._source, self._store = parts.source, parts.store
        if self._link is None:
            self._link = parts.resize
        self._out = Deliveries(parts.sink, self.config, self.stats, self._log)
        self._health.sink_stalled = self._out.stall.stalled
        self._owned = OwnedStreams(self._tasks, parts.source, self.stats, self._out.held)
        self._coordinator = self._health.coordinator = parts.coordinator(self)
        self._serve_metrics(stack)
        metrics = HandoverMetrics.register(self.metrics) if self.metrics else None
        self.handover = NodeHandover(
            parts.handover, self.config.node_id, self._log, metrics, enabled=self.config.handover
        )
        self._checkpoint = Checkpoint(
            out=self._out,
            store=parts.store,
            coordinator=self._coordinator,
            streams=self._owned,
            handover=self.handover,
            stats=self.stats,
            log=self._log,
            metrics=self.metrics,
            interval=self.config.commit_interval,
            transactions=parts.transactions,
        )

    def _serve_metrics(self, stack: ExitStack) -> None:
        if self.config.metrics_port is None:
            return
        self.metrics = NodeMetrics(self.config.node_id)
        server = MetricsServer(
            self.metrics,
            port=self.config.metrics_port,
            host=self.config.metrics_host,
            alive=self._health.alive,
            ready=self._health.ready,
        ).start()
        stack.callback(server.close)
        self._metrics_port = server.port
        self._log.info("metrics_serving", port=server.port, paths="/metrics /healthz /readyz")

    def _loop_until_stopped(self) -> None:
        while not self._stop.is_set():
            self._step()

    def _leave(self) -> None:
        """Drain (when configured), wait a bounded time for a paused coordinator, then go."""
        coordinator = self._coordinator
        assert coordinator is not None
        drain = self.config.drain_seconds or 0.0
        deadline = time.monotonic() + drain + self.config.session_timeout
        if drain:
            coordinator.drain(drain)
            while coordinator.state not in _DONE and time.monotonic() < deadline:
                self._step()
        while coordinator.paused and coordinator.state not in _DONE:
            if time.monotonic() >= deadline:
                # No commit can be certain without ZooKeeper: leave the last commits as they are.
                self._log.warning(
                    "shutdown_uncommitted",
                    streams=self.streams,
                    note="coordinator still paused; the next owners replay",
                )
                self._drop(list(self._tasks))
                return
            self._step()

    def _close_coordinator(self) -> None:
        assert self._coordinator is not None
        try:
            self._coordinator.close()  # on_revoked commits what is still held, then releases
        except SessionizerError as exc:
            self._log.warning("close_failed", error=str(exc), note="claims end with the session")

    def _crash(self, exc: BaseException) -> None:
        """Forget every stream without committing: the last commits are the certain ones."""
        self._log.error(
            "node_crashed",
            error=f"{type(exc).__name__}: {exc}",
            streams=self.streams,
            note="nothing committed after the error",
            exc_info=exc,
        )
        self._drop(list(self._tasks), reassign=False)

    def _step(self) -> None:
        """Poll, hand the records to their tasks (which deliver their output), checkpoint."""
        coordinator, checkpoint = self._coordinator, self._checkpoint
        assert coordinator is not None and checkpoint is not None
        idle = not self._tasks or coordinator.paused
        coordinator.poll(timeout=self.config.poll_timeout if idle else 0.0)
        if not coordinator.paused and self._tasks:
            started = time.monotonic()
            self._consume()
            self._busy_seconds += time.monotonic() - started
            if checkpoint.expired():
                checkpoint.commit(list(self._tasks))
        self.stats.maybe_report(self._log, self._tasks, self._source, self.config.stats_interval)
        now = self._health.beat()
        if self.metrics is not None and now - self._last_publish >= 1.0:
            self._publish()
        if now - self._last_load_report >= 1.0:  # each stream's load, for --balance load
            coordinator.report_load(load_counts(self._tasks), self._busy_seconds)
            self._last_load_report = now

    def _publish(self) -> None:
        assert self.metrics is not None and self._out is not None and self._store is not None
        sizes, unsendable = self._store.sizes, self._out.sink.unsendable
        stalled = self._out.stall.stalled() is not None
        self.metrics.publish(
            metrics_snapshot(
                self.stats, self._tasks, self._source, sizes, unsendable, sink_stalled=stalled
            )
        )
        self._last_publish = time.monotonic()

    # -- records -------------------------------------------------------------------

    def _consume(self) -> None:
        assert self._source is not None
        fetched = self._source.poll(self.config.poll_timeout, self.config.max_poll_records)
        if fetched.error is not None:  # the records fetched with it are applied all the same
            self._log.warning("poll_failed", error=fetched.error, note="retrying")
        reread = self._fetch_failures(fetched)
        # The tasks as fetched for: one rewound or revoked meanwhile was re-sought already.
        tasks = dict(self._tasks)
        for stream, records in fetched.records.items():
            task = tasks.get(stream)
            if task is not None:
                reread |= self._apply(task, records)
                # Its writes to other streams, acknowledged now; its resize record written.
                if self._link is not None and not self._link.after(task):
                    self._give_up(stream)
                    reread = True
        if reread:
            self._reassign()

    def _fetch_failures(self, fetched: Fetched) -> bool:
        """Quarantine streams outside their log; True if some stream must be read again."""
        for stream, offset in fetched.outside.items():
            if stream in self._tasks:
                self._refuse(stream, f"read position {offset} is outside the stream's log")
        failed = [stream for stream in fetched.errors if stream in self._tasks]
        for stream in failed:
            # Its records fetched before the error are applied; re-reading from the
            # position then fetches again whatever the client skipped past the error.
            self._log.warning(
                "fetch_failed",
                stream=stream,
                position=self._tasks[stream].position,
                error=fetched.errors[stream],
                note="re-reading the stream from its position",
            )
        return bool(fetched.outside or failed)

    def _apply(self, task: StreamTask, records: Sequence[SourceRecord]) -> bool:
        """Feed one stream's records to its engine; True if it must be read again."""
        assert self._checkpoint is not None and self._out is not None
        stream, owned, handle, deliver = (
            task.stream,
            self._tasks,
            task.handle,
            self._checkpoint.deliver,
        )
        # Most records close no session: with nothing to send, only at-most-once (whose
        # held output may have reached its bound) needs the checkpoint to look.
        always = not self._out.at_least_once
        for record in records:
            if owned.get(stream) is not task:
                return False  # revoked, rewound or held meanwhile: re-sought already
            offset = record.offset
            if offset < task.position:
                continue  # fetched before a seek
            if offset > task.position:  # records skipped: never applied past them (gaps.py)
                lasting = self._gaps.refuse(stream, task.position, offset)
                if lasting is not None:
                    self._refuse(stream, lasting)
                return True
            outputs = handle(record)
            if outputs or always:
                deliver(task, outputs)
        self._gaps.passed(stream, task.position)
        return False

    # -- BalancerListener: called by Coordinator.poll on this thread ---------------

    def on_assigned(self, leases: Sequence[StreamLease]) -> None:
        """Load each new stream's state and resume it from its safe offset."""
        assert self._store is not None and self._coordinator is not None
        self.stats.rebalances += 1
        # Every state read at once, not a round trip per stream (exactly-once: and every
        # producer's init_transactions at once).
        self._store.prepare([lease.stream for lease in leases])
        loaded: list[tuple[StreamState, int]] = []
        for lease in leases:
            try:
                loaded.append((self._store.load(lease.stream, lease.epoch), lease.epoch))
            except CorruptStateError as exc:
                self._quarantine(lease.stream, f"corrupt state: {exc.problem}")
            except StateError as exc:
                self._log.warning("stream_load_failed", stream=lease.stream, error=str(exc))
                self._coordinator.report_fenced(lease.stream)
        # From the previous owners' handovers where they left ones that fit, else by replay.
        resumptions = self.handover.resume_many(self.processor, loaded)
        resumed = {stream: resumption.task for stream, resumption in resumptions.items()}
        if self._link is not None:
            for stream, task in list(resumed.items()):
                if not self._link.prepare(task):  # its resize unknown: not run blind
                    del resumed[stream]
                    self._coordinator.report_fenced(stream)
        self._tasks.update(resumed)
        self._check_positions(resumed)
        self._reassign()

    def on_revoked(self, streams: Sequence[str]) -> None:
        """Commit, then forget the streams (their claims are deleted after this returns)."""
        self.stats.rebalances += 1
        assert self._coordinator is not None and self._checkpoint is not None
        if not self._coordinator.paused:
            self._checkpoint.release(streams)  # commit, then hand the engines over
        self._drop(streams)

    def on_lost(self, streams: Sequence[str]) -> None:
        """Forget the streams without committing: someone else may own them already."""
        self.stats.rebalances += 1
        if self._checkpoint is not None:
            self._checkpoint.lost(streams)  # exactly-once: abort (or learn fenced), close
        self._drop(streams)

    def on_paused(self) -> None:
        """Stop handing out records and committing until `on_resumed`."""
        self._log.warning("zookeeper_suspended", note="paused until reconnected")

    def on_resumed(self) -> None:
        """Carry on; the coordinator verified the claims we still hold."""
        self._log.info("zookeeper_resumed", streams=len(self._tasks))

    # -- streams -------------------------------------------------------------------

    def _check_positions(self, tasks: dict[str, StreamTask]) -> None:
        """Refuse streams whose stored position lies outside their log (never skip silently)."""
        assert self._source is not None
        if not tasks:
            return
        try:
            bounds = self._source.bounds(list(tasks))
        except SessionizerError as exc:
            # Checked again by the source itself: reading outside the log raises.
            self._log.warning("bounds_unknown", streams=list(tasks), error=str(exc))
            return
        for stream, (start, end) in bounds.items():
            problem = tasks[stream].outside_log(start, end)
            if problem is not None:
                self._refuse(stream, problem)

    def _refuse(self, stream: str, reason: str) -> None:
        self._drop([stream], reassign=False)
        self._quarantine(stream, reason)

    def _quarantine(self, stream: str, reason: str) -> None:
        assert self._coordinator is not None
        self.stats.quarantined += 1
        repair = f"sessionizer streams reset {stream} --from-offset N"
        self._log.error("stream_quarantined", stream=stream, reason=reason, repair=repair)
        self._coordinator.quarantine(stream, reason)

    def _give_up(self, stream: str) -> None:
        """Forget `stream` without committing and let the balancer hand it out again."""
        assert self._coordinator is not None
        self._drop([stream], reassign=False)
        self._coordinator.report_fenced(stream)

    def _drop(self, streams: Sequence[str], *, reassign: bool = True) -> None:
        assert self._owned is not None
        self._owned.drop(streams, reassign=reassign)

    def _reassign(self) -> None:
        assert self._owned is not None
        self._owned.reassign()
