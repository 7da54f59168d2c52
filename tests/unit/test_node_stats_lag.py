"""`node_stats`' lag: from the consumer's fetches while the node reads, from the brokers
when it does not (and `kafka_unreachable` when they do not answer)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from framework.kafka.errors import ClientError
from framework.node.stats import NodeStats
from framework.node.task import StreamTask
from sessionizer.examples.weblog import WebSessions
from state.record import StreamState

STREAMS = ("app.stream.0000", "app.stream.0001")


class CountingSource:
    """What `node_stats` asks of a record source, counted; `down` makes the brokers fail."""

    def __init__(self) -> None:
        self.bounds_asked = 0
        self.down = False
        self.seen_ends: dict[str, int] = {}
        self.broker_ends = {stream: 500 for stream in STREAMS}

    def bounds(self, streams: Sequence[str]) -> Mapping[str, tuple[int, int]]:
        self.bounds_asked += 1
        if self.down:
            raise ClientError("cannot read the bounds of 2 streams (all brokers down)")
        return {stream: (0, self.broker_ends[stream]) for stream in streams}

    def ends(self, streams: Sequence[str]) -> Mapping[str, int]:
        return {stream: self.seen_ends[stream] for stream in streams if stream in self.seen_ends}


class Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def info(self, event: str, **fields: Any) -> None:
        self.events.append((event, fields))

    warning = info


def _report(stats: NodeStats, log: Log, tasks: dict[str, StreamTask], source: Any) -> None:
    stats.maybe_report(log, tasks, source, interval=0.0)


def _lags(log: Log) -> list[dict[str, int]]:
    return [fields["lag"] for event, fields in log.events if event == "node_stats"]


def test_while_the_node_reads_the_lag_comes_from_its_fetches_without_a_request() -> None:
    tasks = {s: StreamTask.resume(WebSessions(), StreamState.initial(s)) for s in STREAMS}
    source, log, stats = CountingSource(), Log(), NodeStats()
    _report(stats, log, tasks, source)  # the first report: nothing known read yet
    assert source.bounds_asked == 1
    tasks[STREAMS[0]].position = 100  # records were read since
    source.seen_ends = {STREAMS[0]: 400, STREAMS[1]: 450}
    _report(stats, log, tasks, source)
    assert source.bounds_asked == 1, "a reading node must not wait on the brokers for its lag"
    assert _lags(log) == [{STREAMS[0]: 500, STREAMS[1]: 500}, {STREAMS[0]: 300, STREAMS[1]: 450}]


def test_an_idle_node_asks_the_brokers_and_says_when_kafka_is_unreachable() -> None:
    tasks = {s: StreamTask.resume(WebSessions(), StreamState.initial(s)) for s in STREAMS}
    source, log, stats = CountingSource(), Log(), NodeStats()
    source.seen_ends = {STREAMS[0]: 0, STREAMS[1]: 0}
    _report(stats, log, tasks, source)
    _report(stats, log, tasks, source)  # nothing read since: the fetches may be stale
    assert source.bounds_asked == 2
    assert _lags(log)[-1] == {STREAMS[0]: 500, STREAMS[1]: 500}
    source.down = True
    _report(stats, log, tasks, source)
    assert source.bounds_asked == 3
    assert [event for event, _ in log.events].count("kafka_unreachable") == 1
    assert _lags(log)[-1] == {}


def test_a_stream_the_fetches_have_not_covered_yet_sends_the_report_to_the_brokers() -> None:
    tasks = {s: StreamTask.resume(WebSessions(), StreamState.initial(s)) for s in STREAMS}
    source, log, stats = CountingSource(), Log(), NodeStats()
    _report(stats, log, tasks, source)
    tasks[STREAMS[0]].position = 10
    source.seen_ends = {STREAMS[0]: 40}  # the other stream: no fetch response yet
    _report(stats, log, tasks, source)
    assert source.bounds_asked == 2
    assert _lags(log)[-1] == {STREAMS[0]: 490, STREAMS[1]: 500}


def test_the_first_report_of_a_node_that_has_read_does_not_wait_on_the_brokers() -> None:
    # The first report comes `stats_interval` after start, mid-read: asking the brokers
    # then blocked the loop about half a second (benchmarks/HOT_PATH.md, round 11).
    tasks = {s: StreamTask.resume(WebSessions(), StreamState.initial(s)) for s in STREAMS}
    source, log, stats = CountingSource(), Log(), NodeStats()
    tasks[STREAMS[1]].position = 30  # read since the task was made
    source.seen_ends = {STREAMS[0]: 400, STREAMS[1]: 450}
    _report(stats, log, tasks, source)
    assert source.bounds_asked == 0
    assert _lags(log) == [{STREAMS[0]: 400, STREAMS[1]: 420}]
