"""A node's Prometheus metrics, and the `/metrics`, `/healthz`, `/readyz` endpoints that serve them.

The loop thread is the only one that touches the engines (DESIGN section 7),
so it publishes a `MetricsSnapshot` every second; the HTTP thread only reads
the last one. Names follow Prometheus' conventions, prefixed `sessionizer_`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from framework.node.ports import Coordinator

__all__ = [
    "LoopHealth",
    "MetricsServer",
    "MetricsSnapshot",
    "NodeMetrics",
    "Probe",
    "StreamFigures",
]

_PREFIX = "sessionizer"
Probe = Callable[[], tuple[bool, str]]
"""A health check: (healthy, why), called on the HTTP thread; it must only read."""


@dataclass(frozen=True, slots=True)
class StreamFigures:
    """One owned stream's figures at a publish."""

    lag: int | None
    safe_offset_lag: int | None
    open_sessions: int
    state_bytes: int | None


@dataclass(frozen=True)
class MetricsSnapshot:
    """Everything `/metrics` shows, as of one moment of the loop."""

    totals: Mapping[str, int] = field(default_factory=dict)
    dead_letters: Mapping[str, int] = field(default_factory=dict)
    streams: Mapping[str, StreamFigures] = field(default_factory=dict)
    sink_stalled: bool = False
    """Output has failed for `--sink-stall-timeout` with nothing acknowledged (`SinkStallWatch`)."""


# (name, help, key in MetricsSnapshot.totals)
_COUNTERS = (
    ("fragments_consumed", "Fragments read from the streams", "fragments"),
    ("sessions_emitted", "Finished sessions handed to the sink", "sessions"),
    ("late_fragments", "Fragments later than the processor's grace", "late"),
    ("future_records", "Records refused as dated too far ahead of stream time", "future"),
    ("truncated_sessions", "Sessions closed early to keep the stream's state small", "truncated"),
    (
        "skipped_by_ignore_list",
        "Fragments skipped on resume (already in a session)",
        "skipped_by_ignore_list",
    ),
    ("rebalances", "Streams assigned, revoked or lost", "rebalances"),
    ("sink_send_failures", "Failed sends or flushes of output", "sink_failures"),
    ("rewinds", "Streams rewound to their last commit after a sink failure", "rewinds"),
    ("quarantined_streams", "Streams quarantined by this node", "quarantined"),
    (
        "gaps_reseeked",
        "Records refused as past their stream's read position; the stream was re-read",
        "gaps_reseeked",
    ),
    ("commits", "State commits", "commits"),
)


class NodeMetrics:
    """The registry of one node: a commit-latency histogram plus the published snapshot."""

    def __init__(self, node: str) -> None:
        self.node = node
        self.registry = CollectorRegistry(auto_describe=True)
        self.commit_latency = Histogram(
            f"{_PREFIX}_commit_latency_seconds",
            "Time to commit the owned streams' state (one commit round)",
            labelnames=["node"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
        ).labels(node)
        self._snapshot = MetricsSnapshot()
        self._lock = threading.Lock()
        self.registry.register(self)  # a custom collector: `collect` is all it needs

    def publish(self, snapshot: MetricsSnapshot) -> None:
        """Make `snapshot` what the next scrape shows (called by the loop thread)."""
        with self._lock:
            self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        """The published figures as metric families (called by the HTTP thread)."""
        with self._lock:
            snapshot = self._snapshot
        for name, text, key in _COUNTERS:
            family = CounterMetricFamily(f"{_PREFIX}_{name}", text, labels=["node"])
            family.add_metric([self.node], snapshot.totals.get(key, 0))
            yield family
        letters = CounterMetricFamily(
            f"{_PREFIX}_dead_letters", "Dead letters, by reason", labels=["node", "reason"]
        )
        for reason, count in sorted(snapshot.dead_letters.items()):
            letters.add_metric([self.node, reason], count)
        yield letters
        owned = GaugeMetricFamily(f"{_PREFIX}_streams_owned", "Streams owned", labels=["node"])
        owned.add_metric([self.node], len(snapshot.streams))
        yield owned
        stalled = GaugeMetricFamily(
            f"{_PREFIX}_sink_stalled",
            "1 while output has failed for --sink-stall-timeout with nothing acknowledged",
            labels=["node"],
        )
        stalled.add_metric([self.node], int(snapshot.sink_stalled))
        yield stalled
        yield from self._per_stream(snapshot.streams)

    def _per_stream(self, streams: Mapping[str, StreamFigures]) -> Iterator[Metric]:
        gauges = {
            "lag": ("stream_lag", "Records behind the stream's end"),
            "safe_offset_lag": ("safe_offset_lag", "Records between the safe offset and the end"),
            "open_sessions": ("open_sessions", "Open sessions"),
            "state_bytes": ("state_record_bytes", "Size of the last committed state record"),
        }
        for attribute, (name, text) in gauges.items():
            family = GaugeMetricFamily(f"{_PREFIX}_{name}", text, labels=["node", "stream"])
            for stream, figures in sorted(streams.items()):
                value = getattr(figures, attribute)
                if value is not None:
                    family.add_metric([self.node, stream], value)
            yield family


class LoopHealth:
    """What the probes report: the loop beats every step; the HTTP thread only reads."""

    def __init__(self, stall_limit: float, stopping: threading.Event) -> None:
        self.stall_limit = stall_limit
        self.stopping = stopping
        self.coordinator: Coordinator | None = None
        self.sink_stalled: Callable[[], str | None] | None = None
        """Why output is stalled, or None (`SinkStallWatch.stalled`), once there is a sink."""
        self.last_step = time.monotonic()

    def beat(self) -> float:
        """The loop finished a step now; return the time."""
        self.last_step = time.monotonic()
        return self.last_step

    def alive(self) -> tuple[bool, str]:
        """The loop stepped within the longest legitimate block (a flush, then commits)."""
        age = time.monotonic() - self.last_step
        return age < self.stall_limit, f"last loop step {age:.1f} s ago"

    def ready(self) -> tuple[bool, str]:
        """Joined, not paused by a ZooKeeper outage, the loop stepping and output acknowledged.

        `connected` is kazoo's own connection state, so an outage shows here at once;
        `paused` follows only when the loop next polls the coordinator.
        """
        coordinator = self.coordinator
        if coordinator is None or self.stopping.is_set():
            return False, "not running"
        if coordinator.paused:
            return False, "paused: ZooKeeper is unreachable"
        if not coordinator.connected:
            return False, "ZooKeeper connection down"
        alive, why = self.alive()
        if not alive:
            return False, f"loop stalled: {why}"
        stalled = self.sink_stalled() if self.sink_stalled is not None else None
        if stalled is not None:
            return False, stalled
        state = str(coordinator.state)
        return state in ("balancing", "stable"), f"coordinator {state}"


class MetricsServer:
    """Serves `/metrics`, `/healthz` (the loop is alive) and `/readyz` (joined, not paused,
    output acknowledged)."""

    def __init__(
        self,
        metrics: NodeMetrics,
        *,
        port: int,
        host: str = "0.0.0.0",
        alive: Probe,
        ready: Probe,
    ) -> None:
        handler = _handler(metrics, alive, ready)
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="metrics-http", daemon=True
        )

    @property
    def port(self) -> int:
        """The port bound (useful with port 0)."""
        return int(self._server.server_address[1])

    def start(self) -> MetricsServer:
        """Serve in a daemon thread."""
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and free the port."""
        self._server.shutdown()
        self._server.server_close()


def _handler(metrics: NodeMetrics, alive: Probe, ready: Probe) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.startswith("/metrics"):
                self._answer(200, generate_latest(metrics.registry), CONTENT_TYPE_LATEST)
            elif self.path.startswith("/healthz"):
                self._probe(alive())
            elif self.path.startswith("/readyz"):
                self._probe(ready())
            else:
                self._answer(404, b"not found: try /metrics, /healthz or /readyz\n")

        def _probe(self, result: tuple[bool, str]) -> None:
            ok, why = result
            self._answer(200 if ok else 503, f"{'ok' if ok else 'not ok'}: {why}\n".encode())

        def _answer(self, code: int, body: bytes, kind: str = "text/plain") -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            """Scrapes are not worth a log line each."""

    return Handler


# -- handovers (issue 13): counted as they happen, on the loop thread -----------------


@dataclass(frozen=True)
class HandoverMetrics:
    """Records replayed on resume, and handovers written, used and refused (with the reason)."""

    records_replayed: Any
    handovers: Any

    @classmethod
    def register(cls, metrics: NodeMetrics) -> HandoverMetrics:
        """Add the counters to the node's registry."""
        from prometheus_client import Counter

        replayed = Counter(
            f"{_PREFIX}_records_replayed",
            "Records a resumed stream re-reads before new ones (0 after a handover)",
            labelnames=["node"],
            registry=metrics.registry,
        )
        handovers = Counter(
            f"{_PREFIX}_handovers",
            "Handovers by outcome: written, used, or why the next owner replayed instead",
            labelnames=["node", "outcome"],
            registry=metrics.registry,
        )
        return cls(replayed.labels(metrics.node), handovers)

    def count(self, node: str, outcome: str, replayed: int = 0) -> None:
        """One handover outcome, and the records the resume replays."""
        self.handovers.labels(node, outcome).inc()
        if replayed:
            self.records_replayed.inc(replayed)
