"""`Node`: one process, one loop thread, one record source, one engine per owned stream.

The loop alternates: apply coordinator events (`Coordinator.poll`, which calls
this node's listener methods on this thread), read records of the owned
streams and feed them to their engines, and every `commit_interval` flush the
sink and then commit each stream's state (at-least-once; the reverse for
at-most-once). kazoo callbacks never reach this class directly; signal
handlers only call `stop()`.

The guarantees, each unit-tested with fakes of the four parts
(`tests/unit/test_node_loop.py`):

- no commit covers output the sink did not confirm: a failed send or flush
  rewinds every stream that had output since the last good flush to its last
  commit (`Deliveries`);
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
from framework.node.config import NodeConfig
from framework.node.deliveries import Deliveries
from framework.node.errors import NodeCrashed
from framework.node.gaps import OffsetGaps
from framework.node.handover import NodeHandover
from framework.node.loader import load_processor
from framework.node.metrics import HandoverMetrics, LoopHealth, MetricsServer, NodeMetrics
from framework.node.parts import NodeParts, connect_parts
from framework.node.ports import Coordinator, Fetched, RecordSource, SourceRecord
from framework.node.stats import NodeStats, load_counts, metrics_snapshot
from framework.node.task import StreamTask
from sessionizer.processor import StreamProcessor
from state.errors import (
    CommitUncertainError,
    CorruptStateError,
    FencedError,
    StateError,
    StateTooLargeError,
)
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
    ) -> None:
        if processor is None and not config.processor:
            raise ConfigError("a node needs a processor: pass one, or set --processor")
        self.config = config
        self.processor = processor or load_processor(config.processor)
        self.stats = NodeStats()
        self._parts = parts
        self._tasks: dict[str, StreamTask] = {}
        self._stop = threading.Event()
        self._last_commit = time.monotonic()
        self._log = log.bind(node=config.node_id)
        self._source: RecordSource | None = None
        self._store: StateStore | None = None
        self._coordinator: Coordinator | None = None
        self._out: Deliveries | None = None
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
            parts = self._parts or stack.enter_context(connect_parts(self.config))
            self._source, self._store = parts.source, parts.store
            self._out = Deliveries(parts.sink, self.config, self.stats, self._log)
            self._coordinator = self._health.coordinator = parts.coordinator(self)
            self._serve_metrics(stack)
            metrics = HandoverMetrics.register(self.metrics) if self.metrics else None
            self.handover = NodeHandover(
                parts.handover,
                self.config.node_id,
                self._log,
                metrics,
                enabled=self.config.handover,
            )
            self._coordinator.start()
            self._log.info("node_started", app=self.config.connection.app)
            try:
                self._loop_until_stopped()
                self._leave()
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
        coordinator = self._coordinator
        assert coordinator is not None
        idle = not self._tasks or coordinator.paused
        coordinator.poll(timeout=self.config.poll_timeout if idle else 0.0)
        if not coordinator.paused and self._tasks:
            started = time.monotonic()
            self._consume()
            self._busy_seconds += time.monotonic() - started
            if time.monotonic() - self._last_commit >= self.config.commit_interval:
                self._commit(list(self._tasks))
        self.stats.maybe_report(self._log, self._tasks, self._source, self.config.stats_interval)
        now = self._health.beat()
        if self.metrics is not None and now - self._last_publish >= 1.0:
            self._publish()
        if now - self._last_load_report >= 1.0:  # each stream's load, for --balance load
            coordinator.report_load(load_counts(self._tasks), self._busy_seconds)
            self._last_load_report = now

    def _publish(self) -> None:
        assert self.metrics is not None and self._out is not None
        sizes = getattr(self._store, "sizes", {})
        self.metrics.publish(
            metrics_snapshot(
                self.stats, self._tasks, self._source, sizes, self._out.sink.unsendable
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
        assert self._out is not None
        stream = task.stream
        for record in records:
            if self._tasks.get(stream) is not task:
                return False  # revoked, rewound or held meanwhile: re-sought already
            offset = record.offset
            if offset < task.position:
                continue  # fetched before a seek
            if offset > task.position:  # records skipped: never applied past them (gaps.py)
                lasting = self._gaps.refuse(stream, task.position, offset)
                if lasting is not None:
                    self._refuse(stream, lasting)
                return True
            if self._out.deliver(task, task.handle(record)):
                self._rewind(self._out.rewind_set(self._tasks.values()))
            elif self._out.held(task):
                self._hold(task)
        self._gaps.passed(stream, task.position)
        return False

    def _rewind(self, streams: Sequence[str]) -> None:
        """Replace the tasks by fresh ones from their last commits, and re-read from there."""
        if not streams:
            return
        for stream in streams:
            self._tasks[stream] = self._tasks[stream].rewound()
            self.stats.rewinds += 1
        self._log.warning("streams_rewound", streams=list(streams))
        self._reassign()

    def _hold(self, task: StreamTask) -> None:
        """At-most-once output is piling up uncommitted: try to commit it now, else stop reading."""
        self._commit([task.stream])
        if self._tasks.get(task.stream) is task and self._out and self._out.held(task):
            self._log.warning("stream_held", stream=task.stream, unsent=len(task.unsent))
            self._reassign()

    # -- commits -------------------------------------------------------------------

    def _commit(self, streams: Sequence[str]) -> None:
        """Flush the sink, then commit the streams' state (the order is the guarantee)."""
        assert self._out is not None
        self._last_commit = time.monotonic()
        at_least_once = self.config.delivery == "at-least-once"
        if at_least_once and not self._out.flush(self._tasks.values()):
            self._rewind(self._out.rewind_set(self._tasks.values()))
            return  # nothing committed: the unconfirmed output is replayed
        started = time.monotonic()
        committed = self._commit_states([self._tasks[s] for s in streams if s in self._tasks])
        if not at_least_once:
            released = [self._out.send_unsent(task) for task in committed]
            self._out.flush(self._tasks.values())
            if any(released):
                self._reassign()
        seconds = time.monotonic() - started
        self.stats.commit_latency(seconds, len(streams))
        if self.metrics is not None and streams:
            self.metrics.commit_latency.observe(seconds)

    def _commit_states(self, tasks: list[StreamTask]) -> list[StreamTask]:
        """Commit the tasks whose state moved, in one batch; return those now committed."""
        assert self._store is not None and self._coordinator is not None
        if not self._coordinator.connected:
            return []  # a write now would wait for the reconnect; commit at the next interval
        # A replaying task's stored state is still the better one; an unchanged one is stored.
        live = [task for task in tasks if not task.replaying]
        states = {task.stream: task.snapshot() for task in live}
        changed = [states[task.stream] for task in live if states[task.stream] != task.committed]
        outcomes = self._store.commit_many(changed) if changed else {}
        committed = []
        for task in live:
            error = outcomes.get(task.stream)
            if error is not None:
                self._commit_failed(task, error)
                continue
            if task.stream in outcomes:
                task.committed_as(states[task.stream])
                self.stats.commits += 1
            committed.append(task)
        self.stats.skipped_commits += len(live) - len(changed)
        return committed

    def _commit_failed(self, task: StreamTask, exc: StateError) -> None:
        assert self._coordinator is not None
        if isinstance(exc, FencedError | CommitUncertainError):
            self._log.warning("stream_fenced", stream=task.stream, error=str(exc))
            self._drop([task.stream])
            self._coordinator.report_fenced(task.stream)
        elif isinstance(exc, StateTooLargeError):
            # The engine bounds its state by construction; this is a bug worth shouting about.
            self.stats.oversized_states += 1
            self._log.error("state_too_large", stream=task.stream, error=str(exc))
        else:
            self._log.warning("commit_failed", stream=task.stream, error=str(exc))

    # -- BalancerListener: called by Coordinator.poll on this thread ---------------

    def on_assigned(self, leases: Sequence[StreamLease]) -> None:
        """Load each new stream's state and resume it from its safe offset."""
        assert self._store is not None and self._coordinator is not None
        self.stats.rebalances += 1
        resumed: dict[str, StreamTask] = {}
        self.handover.start_batch()
        for lease in leases:
            try:
                state = self._store.load(lease.stream, lease.epoch)
            except CorruptStateError as exc:
                self._quarantine(lease.stream, f"corrupt state: {exc.problem}")
                continue
            except StateError as exc:
                self._log.warning("stream_load_failed", stream=lease.stream, error=str(exc))
                self._coordinator.report_fenced(lease.stream)
                continue
            # From the previous owner's handover when it left one that fits, else by replay.
            resumed[lease.stream] = self.handover.resume(self.processor, state, lease.epoch).task
        self._tasks.update(resumed)
        self._check_positions(resumed)
        self._reassign()

    def on_revoked(self, streams: Sequence[str]) -> None:
        """Commit, then forget the streams (their claims are deleted after this returns)."""
        self.stats.rebalances += 1
        assert self._coordinator is not None
        if not self._coordinator.paused:
            self._commit([s for s in streams if s in self._tasks])
            assert self._store is not None
            # Committed: hand each engine to the next owner before the claim goes.
            self.handover.give([self._tasks[s] for s in streams if s in self._tasks], self._store)
        self._drop(streams)

    def on_lost(self, streams: Sequence[str]) -> None:
        """Forget the streams without committing: someone else may own them already."""
        self.stats.rebalances += 1
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

    def _drop(self, streams: Sequence[str], *, reassign: bool = True) -> None:
        for stream in streams:
            task = self._tasks.pop(stream, None)
            if task is not None:
                self.stats.retire(task)
        if reassign:
            self._reassign()

    def _reassign(self) -> None:
        assert self._source is not None and self._out is not None
        # Every owned stream is re-sought, so fetched-but-unprocessed records of a stream
        # kept across the reassignment are simply fetched again; held streams wait.
        self._source.assign(
            {s: t.position for s, t in self._tasks.items() if not self._out.held(t)}
        )
