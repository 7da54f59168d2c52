"""A sink that keeps failing: one `sink_stalled` error past `--sink-stall-timeout`, `/readyz`
503 meanwhile, and `sink_recovered` once output is acknowledged again."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from structlog.testing import capture_logs

from framework.kernel.errors import ConfigError
from framework.node.metrics import LoopHealth
from framework.node.node import Node
from framework.node.sink_stall import SinkStallWatch
from framework.testkit.memory import (
    FlushingSink,
    MemoryLog,
    memory_parts,
    node_config,
    traffic_log,
)
from router.generator import generate_fragments
from sessionizer.examples.weblog import WebSessions
from state.store import VersionedMemory


class Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []

    def error(self, event: str, **fields: Any) -> None:
        self.events.append(("error", event, fields))

    def info(self, event: str, **fields: Any) -> None:
        self.events.append(("info", event, fields))

    def warning(self, event: str, **fields: Any) -> None:
        self.events.append(("warning", event, fields))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_failures_past_the_limit_are_reported_once_and_recovery_clears_them() -> None:
    log, clock = Log(), Clock()
    watch = SinkStallWatch(60.0, log, clock)
    watch.failed("flush timed out")
    clock.now += 59.0
    watch.failed("flush timed out")
    assert watch.stalled() is None and log.events == [], "within the limit: only warnings"
    clock.now += 1.0
    watch.failed("KafkaTimeoutError: topic app.sessions not present in metadata")
    clock.now += 30.0
    watch.failed("KafkaTimeoutError: topic app.sessions not present in metadata")
    assert [(level, event) for level, event, _ in log.events] == [("error", "sink_stalled")]
    fields = log.events[0][2]
    assert fields["seconds"] == 60.0 and "app.sessions" in fields["error"]
    assert "check that the sessions and dead-letter topics exist" in fields["note"]
    why = watch.stalled()
    assert why is not None and "no output acknowledged for 90 s" in why and "app.sessions" in why
    watch.delivered()
    assert watch.stalled() is None
    assert log.events[-1][:2] == ("info", "sink_recovered") and log.events[-1][2]["stalled_s"] == 90


def test_one_failure_then_silence_is_not_a_stall() -> None:
    log, clock = Log(), Clock()
    watch = SinkStallWatch(60.0, log, clock)
    watch.failed("one send expired")  # at-most-once: that output is gone, nothing retries it
    clock.now += 3600.0
    assert watch.stalled() is None and log.events == []


def test_an_acknowledgement_between_failures_restarts_the_count() -> None:
    log, clock = Log(), Clock()
    watch = SinkStallWatch(60.0, log, clock)
    for _ in range(5):  # a failure every 40 s, each followed by a good flush
        watch.failed("one send expired")
        clock.now += 40.0
        watch.delivered()
    assert log.events == [] and watch.stalled() is None


def test_readyz_says_the_sink_is_stalled() -> None:
    class Joined:
        paused, connected, state = False, True, "stable"

    log, clock = Log(), Clock()
    watch = SinkStallWatch(10.0, log, clock)
    health = LoopHealth(stall_limit=3600.0, stopping=threading.Event())
    health.coordinator = Joined()  # type: ignore[assignment]
    health.sink_stalled = watch.stalled
    assert health.ready() == (True, "coordinator stable")
    watch.failed("flush timed out")
    clock.now += 11.0
    assert health.ready()[0], "no failure seen past the limit yet: a failure declares the stall"
    watch.failed("flush timed out")
    ready, why = health.ready()
    assert not ready and why == "sink stalled: no output acknowledged for 11 s (flush timed out)"
    watch.delivered()
    assert health.ready()[0]


def test_a_node_whose_flushes_keep_failing_says_so_once_then_recovers() -> None:
    fragments = list(generate_fragments(120, seed=7))
    sink = FlushingSink(fail_flushes=range(2, 8))  # six failed flushes in a row, then good
    log = MemoryLog(traffic_log(fragments, 4))
    parts = memory_parts(log, sink, VersionedMemory(), log.caught_up)
    # The second failure in a row is past the stall timeout.
    node = Node(node_config(sink_stall_timeout=1e-9), processor=WebSessions(), parts=parts)
    with capture_logs() as logs:
        node.run()
    events = [entry["event"] for entry in logs]
    assert node.stats.sink_failures == 6
    assert events.count("sink_stalled") == 1 and events.count("sink_recovered") == 1
    assert events.index("sink_stalled") < events.index("sink_recovered")
    assert node._out is not None and node._out.stall.stalled() is None


def test_the_stall_timeout_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="sink_stall_timeout must be > 0"):
        node_config(sink_stall_timeout=0)


def test_a_flush_with_nothing_sent_does_not_end_a_stall() -> None:
    from framework.node.deliveries import Deliveries
    from framework.node.stats import NodeStats
    from sessionizer.errors import SinkError

    class Sink:
        def __init__(self) -> None:
            self.fail = True

        def flush(self) -> None:
            if self.fail:
                raise SinkError("3 sends to app.sessions were not acknowledged within 2 s")

    sink, log = Sink(), Log()
    out = Deliveries(sink, node_config(sink_stall_timeout=1e-9), NodeStats(), log)  # type: ignore[arg-type]
    out._unflushed = True  # output handed over, then two failed flushes: the stall
    assert not out.flush([]) and not out.flush([])
    assert out.stall.stalled() is not None
    sink.fail = False
    assert out.flush([])  # nothing sent since: a stuck producer flushes nothing at once
    assert out.stall.stalled() is not None, "an empty flush proves no delivery"
    out._unflushed = True
    assert out.flush([])
    assert out.stall.stalled() is None


def test_a_flush_after_a_failed_send_proves_nothing_either() -> None:
    from framework.node.deliveries import Deliveries
    from framework.node.stats import NodeStats
    from sessionizer.errors import SinkError
    from sessionizer.records import FinishedSession

    class Sink:
        """A producer that cannot get the topic's metadata: every send raises; flushes pass."""

        unsendable = None

        def emit(self, session: FinishedSession) -> None:
            raise SinkError("cannot send to app.sessions (Failed to update metadata after 2.0 s)")

        def flush(self) -> None:
            """Nothing was queued: nothing to wait for."""

    out = Deliveries(Sink(), node_config(sink_stall_timeout=1e-9), NodeStats(), Log())  # type: ignore[arg-type]
    session = FinishedSession("s1", "k", "app.stream.0000", 0, 0, 0, 0, 1, {})
    task: Any = None
    for _ in range(3):  # each interval: the replayed session fails to send, then a flush
        assert out.deliver(task, [session])
        assert out.flush([])
    assert out.stall.stalled() is not None


def test_metrics_show_the_stall() -> None:
    from framework.node.metrics import MetricsSnapshot, NodeMetrics

    metrics = NodeMetrics("n1")

    def stalled() -> float:
        (family,) = [f for f in metrics.collect() if f.name == "sessionizer_sink_stalled"]
        return float(family.samples[0].value)

    assert stalled() == 0
    metrics.publish(MetricsSnapshot(sink_stalled=True))
    assert stalled() == 1


def test_exactly_once_aborts_in_a_row_are_a_stall_and_a_commit_with_output_ends_it() -> None:
    from framework.testing.exactly_once import FakeKafka, run_exactly_once

    kafka = FakeKafka()
    kafka.fail = lambda tid, n: "abort" if 3 <= n <= 8 else None  # six commits in a row
    log = MemoryLog(traffic_log(list(generate_fragments(120, seed=7)), 4))
    with capture_logs() as logs:
        node = run_exactly_once(kafka, log, VersionedMemory(), sink_stall_timeout=1e-9)
    events = [entry["event"] for entry in logs]
    assert events.count("transaction_aborted") >= 6
    assert events.count("sink_stalled") == 1 and events.count("sink_recovered") == 1
    assert events.index("sink_stalled") < events.index("sink_recovered")
    assert node._out is not None and node._out.stall.stalled() is None
