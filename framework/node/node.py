"""`Node`: one process, one loop thread, one `KafkaConsumer`, one engine per owned stream.

The loop alternates: apply balancer events (`Balancer.poll`, which calls this
node's listener methods on this thread), fetch records of the owned streams
and feed them to their engines, and every `commit_interval` flush the sink and
then commit each stream's state (at-least-once; the reverse for at-most-once).
kazoo callbacks never reach this class directly; signal handlers only call
`stop()`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from typing import TypeVar

import structlog
from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError
from kazoo.client import KazooClient

from balancer.balancer import Balancer
from balancer.config import BalancerConfig
from balancer.fencing import StreamLease
from balancer.machine import BalancerState
from framework.errors import ConfigError
from framework.node.config import NodeConfig
from framework.node.loader import load_processor
from framework.node.stats import NodeStats
from framework.node.task import Output, StreamTask
from framework.zookeeper import zookeeper_client
from router.naming import deadletter_topic, sessions_topic
from sessionizer.errors import SinkError
from sessionizer.processor import StreamProcessor
from sessionizer.records import FinishedSession
from sessionizer.sinks import KafkaSink, SessionSink
from state.errors import CommitUncertainError, FencedError, StateError, StateTooLargeError
from state.store import FencedStateStore, StateStore
from state.zookeeper_store import ZooKeeperRecords

__all__ = ["Node"]

log = structlog.get_logger("sessionizer.node")
T = TypeVar("T")


class Node:
    """A consumer node; `run()` blocks until `stop()` and then leaves cleanly."""

    def __init__(
        self,
        config: NodeConfig,
        *,
        processor: StreamProcessor | None = None,
        sink: SessionSink | None = None,
    ) -> None:
        self.config = config
        self.processor = processor or load_processor(config.processor)
        self._sink = sink
        self._tasks: dict[str, StreamTask] = {}
        self._stop = threading.Event()
        self._last_commit = time.monotonic()
        self.stats = NodeStats()
        self._log = log.bind(node=config.node_id)
        self._client: KazooClient | None = None
        self._store: StateStore | None = None
        self._consumer: KafkaConsumer | None = None
        self._balancer: Balancer | None = None

    def stop(self) -> None:
        """Ask the loop to stop (safe from a signal handler or another thread)."""
        self._stop.set()

    # -- lifecycle -----------------------------------------------------------------

    def run(self) -> None:
        """Join, consume until stopped, then commit and release (or drain) and exit."""
        connection = self.config.connection
        with ExitStack() as stack:
            self._client = stack.enter_context(
                zookeeper_client(connection.zk, session_timeout=self.config.session_timeout)
            )
            self._store = FencedStateStore(
                ZooKeeperRecords(self._client, connection.paths.stream_states)
            )
            self._consumer = self._connect_kafka(lambda: KafkaConsumer(
                bootstrap_servers=connection.bootstrap,
                group_id=None,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                client_id=f"{connection.app}-{self.config.node_id}",
            ))  # fmt: skip
            stack.callback(self._consumer.close)
            if self._sink is None:
                sink = self._connect_kafka(lambda: KafkaSink(
                    connection.bootstrap,
                    sessions_topic(connection.app),
                    deadletter_topic(connection.app),
                    client_id=f"{connection.app}-{self.config.node_id}-sink",
                ))  # fmt: skip
                stack.callback(sink.close)
                self._sink = sink
            self._balancer = Balancer(self._balancer_config(), self, client=self._client)
            self._balancer.start()
            self._log.info("node_started", app=connection.app, processor=self.config.processor)
            try:
                self._loop_until_stopped()
                self._leave()
            finally:
                self._balancer.close()  # commits what is still held (on_revoked), then releases
        self._log.info("node_stopped", **self.stats.totals(self._tasks.values()))

    def _connect_kafka(self, connect: Callable[[], T]) -> T:
        try:
            return connect()
        except KafkaError as exc:
            raise ConfigError(
                f"node {self.config.node_id}: cannot reach Kafka at "
                f"{self.config.connection.bootstrap} ({exc}); is the cluster up and "
                "--bootstrap / SESSIONIZER_BOOTSTRAP right?"
            ) from exc

    def _balancer_config(self) -> BalancerConfig:
        connection = self.config.connection
        return BalancerConfig(
            zk_hosts=connection.zk,
            app=connection.app,
            consumer_id=self.config.node_id,
            namespace=connection.namespace,
            session_timeout=self.config.session_timeout,
        )

    def _loop_until_stopped(self) -> None:
        assert self._balancer is not None
        while not self._stop.is_set():
            self._step()

    def _leave(self) -> None:
        """Drain (when configured): keep consuming while streams are released one by one."""
        assert self._balancer is not None
        if not self.config.drain_seconds:
            return
        self._balancer.drain(self.config.drain_seconds)
        while self._balancer.state not in (BalancerState.DRAINED, BalancerState.CLOSED):
            self._step()

    def _step(self) -> None:
        assert self._balancer is not None
        idle = not self._tasks or self._balancer.paused
        self._balancer.poll(timeout=self.config.poll_timeout if idle else 0.0)
        if not self._balancer.paused and self._tasks:
            self._consume()
            if time.monotonic() - self._last_commit >= self.config.commit_interval:
                self._commit(list(self._tasks))
        self.stats.maybe_report(self._log, self._tasks, self._consumer, self.config.stats_interval)

    # -- records -------------------------------------------------------------------

    def _consume(self) -> None:
        assert self._consumer is not None
        try:
            batches = self._consumer.poll(
                timeout_ms=int(self.config.poll_timeout * 1000),
                max_records=self.config.max_poll_records,
            )
        except KafkaError as exc:
            self._log.warning("kafka_poll_failed", error=repr(exc), note="retrying")
            return
        for partition, records in batches.items():
            task = self._tasks.get(partition.topic)
            if task is None:
                continue  # fetched before the stream was revoked
            for record in records:
                if record.offset < task.position:
                    continue  # fetched before a seek
                self._deliver(task, task.handle(record))

    def _deliver(self, task: StreamTask, outputs: list[Output]) -> None:
        if self.config.delivery == "at-most-once":
            task.unsent.extend(outputs)  # sent after the next state commit
            return
        self._send(outputs)

    def _send(self, outputs: list[Output]) -> None:
        assert self._sink is not None
        for output in outputs:
            if isinstance(output, FinishedSession):
                self._sink.emit(output)
            else:
                self._sink.dead_letter(output)

    # -- commits -------------------------------------------------------------------

    def _commit(self, streams: Sequence[str]) -> None:
        """Flush the sink, then commit the streams' state (the order is the guarantee)."""
        assert self._sink is not None
        self._last_commit = time.monotonic()
        at_least_once = self.config.delivery == "at-least-once"
        if at_least_once and not self._flush_sink():
            return  # nothing committed: the unflushed output will be replayed
        started = time.monotonic()
        for stream in streams:
            task = self._tasks.get(stream)
            if task is not None and self._commit_one(task) and not at_least_once:
                self._send(task.unsent)
                task.unsent.clear()
        if not at_least_once:
            self._flush_sink()
        self.stats.commit_latency(time.monotonic() - started, len(streams))

    def _flush_sink(self) -> bool:
        assert self._sink is not None
        try:
            self._sink.flush()
        except SinkError as exc:
            self._log.warning("sink_flush_failed", error=str(exc), note="will retry")
            return False
        return True

    def _commit_one(self, task: StreamTask) -> bool:
        assert self._store is not None and self._balancer is not None
        if task.replaying:
            return False  # the stored state is still the better one
        state = task.snapshot()
        try:
            self._store.commit(task.stream, state)
        except (FencedError, CommitUncertainError) as exc:
            self._log.warning("stream_fenced", stream=task.stream, error=str(exc))
            self._drop([task.stream])
            self._balancer.report_fenced(task.stream)
            return False
        except StateTooLargeError as exc:
            self._log.error("state_too_large", stream=task.stream, error=str(exc))
            return False
        except StateError as exc:
            self._log.warning("commit_failed", stream=task.stream, error=str(exc))
            return False
        self.stats.commits += 1
        return True

    # -- BalancerListener: called by Balancer.poll on this thread ------------------

    def on_assigned(self, leases: Sequence[StreamLease]) -> None:
        """Load each new stream's state and resume it from its safe offset."""
        assert self._store is not None and self._balancer is not None
        self.stats.rebalances += 1
        for lease in leases:
            try:
                state = self._store.load(lease.stream, lease.epoch)
            except StateError as exc:
                self._log.warning("stream_load_failed", stream=lease.stream, error=str(exc))
                self._balancer.report_fenced(lease.stream)
                continue
            self._tasks[lease.stream] = StreamTask.resume(self.processor, state)
            self._log.info(
                "stream_resumed",
                stream=lease.stream,
                epoch=lease.epoch,
                offset=state.safe_offset,
                committed_offset=state.committed_offset,
                ignored=len(state.ignore),
            )
        self._reassign()

    def on_revoked(self, streams: Sequence[str]) -> None:
        """Commit, then forget the streams (their claims are deleted after this returns)."""
        self.stats.rebalances += 1
        self._commit([s for s in streams if s in self._tasks])
        self._drop(streams)

    def on_lost(self, streams: Sequence[str]) -> None:
        """Forget the streams without committing: someone else may own them already."""
        self.stats.rebalances += 1
        self._log.warning("streams_lost", streams=list(streams))
        self._drop(streams)

    def on_paused(self) -> None:
        """Stop handing out records and committing until `on_resumed`."""
        self._log.warning("zookeeper_suspended", note="paused until reconnected")

    def on_resumed(self) -> None:
        """Carry on; the balancer verified the claims we still hold."""
        self._log.info("zookeeper_resumed", streams=len(self._tasks))

    def _drop(self, streams: Sequence[str]) -> None:
        for stream in streams:
            task = self._tasks.pop(stream, None)
            if task is not None:
                self.stats.retire(task)
        self._reassign()

    def _reassign(self) -> None:
        assert self._consumer is not None
        partitions = [TopicPartition(stream, 0) for stream in self._tasks]
        self._consumer.assign(partitions)
        for partition in partitions:
            # Every owned stream is re-sought, so fetched-but-unprocessed records of a
            # stream kept across the reassignment are simply fetched again.
            self._consumer.seek(partition, self._tasks[partition.topic].position)
