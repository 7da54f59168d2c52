"""Issue 22's measuring parts: a topic tail in a thread, paced traffic, end-to-end latency.

`TopicTail` reads one single-partition topic from an offset while a run goes
on, noting when each record arrived: `<app>.sessions` with `read_committed`
(when a session became visible to a downstream consumer) and `<app>.state`
with `read_uncommitted` (every state byte written, aborted transactions
included, read before compaction can drop superseded records).
`paced_send` writes fragments at a steady rate and notes when each was
acknowledged.  `closed_by_traffic`, `session_latencies` and `summary` are the
arithmetic.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from framework.kernel.config import ConnectionConfig
from router.fragment import ParsedFragment
from router.producer import ProducerConfig, StreamProducer
from sessionizer.processor import Timing

__all__ = [
    "Arrival",
    "PacedSend",
    "TopicTail",
    "closed_by_traffic",
    "paced_send",
    "per_million",
    "session_latencies",
    "summary",
]

_TICK_S = 0.02  # seconds of traffic per batch: a pacing rate, not a wait for anything


@dataclass(frozen=True)
class Arrival:
    """One record as the tail saw it: wall time of arrival, key and value."""

    at: float
    key: bytes | None
    value: bytes | None

    @property
    def size(self) -> int:
        """Key and value bytes (what the writer chose to store; no Kafka framing)."""
        return len(self.key or b"") + len(self.value or b"")


@dataclass
class TopicTail:
    """Reads partition 0 of `topic` from `start` in a thread until stopped, then to its end.

    Use as a context manager; `arrivals` holds what was read.  One consumer, used
    only on the tail's own thread (kafka-python's consumer is not thread-safe).
    """

    bootstrap: str
    topic: str
    committed: bool
    start: int = 0
    arrivals: list[Arrival] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _error: BaseException | None = None

    def __enter__(self) -> TopicTail:
        self._thread = threading.Thread(target=self._run, name="topic-tail", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def stop(self, timeout: float = 120.0) -> None:
        """Read up to the topic's end as of now, stop; raise what the thread raised."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise TimeoutError(f"the tail of {self.topic} did not finish within {timeout} s")
        if self._error is not None:
            raise RuntimeError(f"the tail of {self.topic} failed: {self._error!r}")

    @property
    def bytes(self) -> int:
        """Key and value bytes read so far."""
        return sum(a.size for a in self.arrivals)

    def _run(self) -> None:
        tp = TopicPartition(self.topic, 0)
        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            client_id="bench-tail",
            isolation_level="read_committed" if self.committed else "read_uncommitted",
            fetch_max_wait_ms=50,  # the arrival time is the measurement: no long fetch waits
        )
        try:
            consumer.assign([tp])
            consumer.seek(tp, self.start)
            while not self._stop.is_set():
                self._poll(consumer)
            end = consumer.end_offsets([tp], timeout_ms=30_000)[tp]
            deadline = time.monotonic() + 60
            while consumer.position(tp) < end and time.monotonic() < deadline:
                self._poll(consumer)
        except BaseException as exc:  # surfaced by `stop`
            self._error = exc
        finally:
            consumer.close()

    def _poll(self, consumer: Any) -> None:
        for batch in consumer.poll(timeout_ms=100).values():
            now = time.time()
            self.arrivals.extend(Arrival(now, r.key, r.value) for r in batch)


@dataclass(frozen=True)
class PacedSend:
    """When each fragment was acknowledged (wall time), and when the end of input was sent."""

    sent_at: list[float]
    ended_at: float


def paced_send(
    connection: ConnectionConfig, streams: int, fragments: Sequence[ParsedFragment], rate: float
) -> PacedSend:
    """Send `fragments` at `rate` per second in small flushed batches, then the end of input."""
    sent_at: list[float] = []
    with StreamProducer(ProducerConfig(connection.bootstrap, connection.app, streams)) as producer:
        began = time.monotonic()
        while len(sent_at) < len(fragments):
            due = min(len(fragments), int((time.monotonic() - began) * rate) + 1)
            for fragment in fragments[len(sent_at) : due]:
                producer.send(fragment)
            producer.flush()
            acknowledged = time.time()
            sent_at.extend([acknowledged] * (due - len(sent_at)))
            time.sleep(_TICK_S)
        ended_at = time.time()
        producer.end_of_input()
        producer.flush()
    return PacedSend(sent_at, ended_at)


def closed_by_traffic(fragments: Sequence[ParsedFragment], timing: Timing, margin_ms: int) -> int:
    """The latest `last_ts` of a session the traffic itself closes (not the end of input).

    A session closes once its stream's time passes its last event by the timeout
    and the grace; a stream's time trails the newest event by up to the
    producer's watermark interval (`margin_ms`).
    """
    newest = max(f.timestamp_ms for f in fragments)
    return newest - timing.timeout_ms - timing.grace_ms - margin_ms


def session_latencies(
    arrivals: Iterable[Arrival],
    fragments: Sequence[ParsedFragment],
    sent: PacedSend,
    cutoff_ms: int,
) -> list[float]:
    """Seconds from each session's last fragment acknowledged to the session read.

    Only sessions that end by `cutoff_ms` (`closed_by_traffic`): the end of input
    closes the others at once, whatever their last fragment's age.
    """
    last_sent: dict[tuple[str, int], float] = {}
    for fragment, at in zip(fragments, sent.sent_at, strict=True):
        last_sent[(fragment.key, fragment.timestamp_ms)] = at
    latencies = []
    for arrival in arrivals:
        if arrival.value is None:
            continue
        session = json.loads(arrival.value)
        produced = last_sent.get((session["key"], session["last_ts"]))
        if produced is not None and session["last_ts"] <= cutoff_ms:
            latencies.append(arrival.at - produced)
    return latencies


def summary(latencies: Sequence[float]) -> dict[str, float | None]:
    """Median, 95th percentile and maximum, in seconds (None without samples)."""
    if not latencies:
        return {"p50_s": None, "p95_s": None, "max_s": None}
    ordered = sorted(latencies)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50_s": statistics.median(ordered), "p95_s": p95, "max_s": ordered[-1]}


def per_million(amount: float | None, fragments: int) -> float | None:
    """`amount` per million fragments (None stays None)."""
    if amount is None or fragments <= 0:
        return None
    return amount * 1_000_000 / fragments
