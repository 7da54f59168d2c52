"""`NodeStats`: a node's counters, summed over its engines, logged periodically."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from framework.kernel.errors import SessionizerError
from framework.node.metrics import MetricsSnapshot, StreamFigures
from framework.node.ports import RecordSource
from framework.node.task import StreamTask
from sessionizer.records import EngineCounters

__all__ = ["NodeStats", "load_counts", "metrics_snapshot"]

_SUMMED = (
    "fragments",
    "sessions",
    "skipped_by_ignore_list",
    "late",
    "future",
    "truncated",
    "invalid_watermarks",
    "hook_failures",
)


@dataclass
class NodeStats:
    """Counters of one node; engine counters of released streams are kept in `retired`."""

    commits: int = 0
    skipped_commits: int = 0
    """Commits not written because the stream's state had not moved since the last one."""
    rebalances: int = 0
    sink_failures: int = 0
    rewinds: int = 0
    quarantined: int = 0
    gaps_reseeked: int = 0
    """Records refused because their offset was past the stream's position (re-read instead)."""
    oversized_states: int = 0
    commit_rounds: int = 0
    """Commit rounds timed (`commit_latency`): the mean's divisor, not `commits`, which
    counts the stream states written (a round may write none, or many)."""
    commit_seconds_total: float = 0.0
    commit_seconds_max: float = 0.0
    retired: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_SUMMED, 0))
    retired_dead_letters: int = 0
    dead_letter_reasons: Counter[str] = field(default_factory=Counter)
    """Dead letters handed to the sink, by reason (sessions the sink could not send apart)."""
    _last_report: float = field(default_factory=time.monotonic)
    _reported_positions: dict[str, int] = field(default_factory=dict)

    def commit_latency(self, seconds: float, streams: int) -> None:
        """Record one commit round."""
        if streams:
            self.commit_rounds += 1
            self.commit_seconds_total += seconds
            self.commit_seconds_max = max(self.commit_seconds_max, seconds)

    def retire(self, task: StreamTask) -> None:
        """Keep the counts of a stream this node no longer owns."""
        counters = task.engine.counters
        for name in _SUMMED:
            self.retired[name] += getattr(counters, name)
        self.retired_dead_letters += task.dead_letters

    def totals(self, tasks: Iterable[StreamTask]) -> dict[str, Any]:
        """All counters, summed over live and retired streams."""
        totals = dict(self.retired)
        dead_letters = self.retired_dead_letters
        open_sessions = 0
        for task in tasks:
            counters: EngineCounters = task.engine.counters
            for name in _SUMMED:
                totals[name] += getattr(counters, name)
            dead_letters += task.dead_letters
            open_sessions += counters.open_sessions
        return {
            **totals,
            "dead_letters": dead_letters,
            "open_sessions": open_sessions,
            "commits": self.commits,
            "skipped_commits": self.skipped_commits,
            "rebalances": self.rebalances,
            "sink_failures": self.sink_failures,
            "rewinds": self.rewinds,
            "quarantined": self.quarantined,
            "gaps_reseeked": self.gaps_reseeked,
            "commit_rounds": self.commit_rounds,
            "commit_ms_mean": round(
                1000 * self.commit_seconds_total / max(1, self.commit_rounds), 2
            ),
            "commit_ms_max": round(1000 * self.commit_seconds_max, 2),
        }

    def maybe_report(
        self,
        log: Any,
        tasks: Mapping[str, StreamTask],
        source: RecordSource | None,
        interval: float,
    ) -> None:
        """Log `node_stats` (with lag per stream) once every `interval` seconds."""
        now = time.monotonic()
        if now - self._last_report < interval:
            return
        self._last_report = now
        positions = {stream: task.position for stream, task in tasks.items()}
        previous, self._reported_positions = self._reported_positions, positions
        # Read since the last report, or since its task was made (a first report).
        reading = any(
            position > previous.get(s, tasks[s].started_at) for s, position in positions.items()
        )
        log.info("node_stats", streams=len(tasks), lag=_lag(tasks, source, log, reading=reading),
                 **self.totals(tasks.values()))  # fmt: skip


def _lag(
    tasks: Mapping[str, StreamTask], source: RecordSource | None, log: Any, *, reading: bool
) -> dict[str, int]:
    """Records behind each stream's end.

    While the node reads, the consumer's fetch responses carry every stream's end
    (`RecordSource.ends`, no request): asking the brokers would wait behind the fetch's
    long poll, a blocked loop of up to a second each report. When nothing was read
    since the last report (or, at the first, since the tasks were made) the loop is idle
    anyway, and asking the brokers is how a node cut off from Kafka says so.
    """
    if not tasks or source is None:
        return {}
    if reading:
        ends = source.ends(list(tasks))
        if ends.keys() >= tasks.keys():
            return {s: max(0, ends[s] - task.position) for s, task in tasks.items()}
    try:
        bounds = source.bounds(list(tasks))
    except SessionizerError as exc:
        # Also how a node cut off from Kafka alone says so: reads just come back empty.
        log.warning("kafka_unreachable", error=str(exc))
        return {}
    return {s: max(0, end - tasks[s].position) for s, (_, end) in bounds.items() if s in tasks}


def metrics_snapshot(
    stats: NodeStats,
    tasks: Mapping[str, StreamTask],
    source: RecordSource | None,
    state_sizes: Mapping[str, int],
    unsendable: Mapping[str, int],
    *,
    sink_stalled: bool = False,
) -> MetricsSnapshot:
    """What `/metrics` shows now: counters, dead letters by reason, and per-stream figures.

    Called every second on the loop thread, so the ends are the consumer's last-seen ones
    (`RecordSource.ends`): asking the brokers would block the loop while one is away.
    """
    ends = source.ends(list(tasks)) if tasks and source is not None else {}
    streams = {}
    for stream, task in tasks.items():
        end = ends.get(stream)
        streams[stream] = StreamFigures(
            lag=None if end is None else max(0, end - task.position),
            safe_offset_lag=None if end is None else max(0, end - task.committed.safe_offset),
            open_sessions=task.engine.counters.open_sessions,
            state_bytes=state_sizes.get(stream),
        )
    return MetricsSnapshot(
        totals=stats.totals(tasks.values()),
        dead_letters=stats.dead_letter_reasons + Counter(unsendable),
        streams=streams,
        sink_stalled=sink_stalled,
    )


def load_counts(tasks: Mapping[str, StreamTask]) -> dict[str, int]:
    """Fragments each owned stream has processed since it was resumed, for load balancing.

    A stream still replaying what its previous owner had read is left out: replay runs
    as fast as the node can read, which says nothing about the stream's traffic.
    """
    return {s: t.engine.counters.fragments for s, t in tasks.items() if not t.replaying}
