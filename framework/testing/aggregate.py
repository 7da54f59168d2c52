"""Finished sessions as test input of `sessionizer aggregate`, written as a node's sink does.

`traffic` makes deterministic sessions (most in the weblog example's shape),
`replays` the identical copies a node's replay writes, `write` puts them on a
real Kafka topic, and `reference` is the pure-Python figures they must give.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from kafka import KafkaProducer

from sessionizer.aggregation.figures import HOUR_MS, Aggregates
from sessionizer.aggregation.python_figures import aggregate_sessions

__all__ = ["BASE_MS", "HOURS", "PAGES", "SITES", "reference", "replays", "traffic", "write"]

BASE_MS = int(datetime(2015, 5, 17, 8, tzinfo=UTC).timestamp() * 1000)
HOURS = 5
PAGES = ["/", "/blog/", "/about", "/articles/spark", "/articles/kafka", "/contact"]
SITES = ["-", "www.google.com", "t.co", "news.ycombinator.com"]


def traffic(seed: int, count: int, *, prefix: str) -> list[dict[str, Any]]:
    """Deterministic finished sessions over `HOURS` hours, most in the weblog example's shape."""
    rng = random.Random(seed)
    sessions = []
    for i in range(count):
        first = BASE_MS + rng.randrange(HOURS * HOUR_MS)
        if i % 20 == 0:  # on an hour boundary, or 1 ms before one
            first = BASE_MS + rng.randrange(1, HOURS) * HOUR_MS - (i // 20) % 2
        fragments = rng.choice([1, 1, 1, 2, 3, 4, 7, 12])
        duration = 0 if fragments == 1 else rng.randrange(1_000, 45 * 60_000)
        ip = f"10.0.{rng.randrange(3)}.{rng.randrange(25)}"
        session: dict[str, Any] = {
            "session_id": f"{prefix}{i}",
            "key": f"{ip}|Mozilla/5.0",
            "stream": f"app.stream.{i % 4:04d}",
            "first_offset": 3 * i,
            "last_offset": 3 * i + fragments - 1,
            "first_ts": first,
            "last_ts": first + duration,
            "fragments": fragments,
        }
        if i % 6:  # WebSessions results; the others look like another processor's
            landing = rng.choice(PAGES) if rng.random() > 0.1 else None
            session |= {
                "ip": ip,
                "site": rng.choice(SITES),
                "landing_page": landing,
                "exit_page": landing,
                "pages": fragments,
                "requests": fragments * 3,
                "bytes": 1000 * fragments,
                "errors": 0,
                "bounce": fragments <= 1,
            }
        sessions.append(session)
    return sessions


def replays(sessions: Sequence[dict[str, Any]], every: int) -> list[dict[str, Any]]:
    """Identical copies of every `every`-th session, as a node replay writes them."""
    return [dict(session) for session in sessions[::every]]


def write(bootstrap: str, topic: str, records: Sequence[dict[str, Any] | bytes]) -> None:
    """Write records to `topic` as the node's Kafka sink does (key = session id)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    try:
        for record in records:
            if isinstance(record, bytes):
                producer.send(topic, value=record)
            else:
                value = json.dumps(record, sort_keys=True).encode()
                producer.send(topic, key=str(record["session_id"]).encode(), value=value)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)


def reference(records: Sequence[dict[str, Any] | bytes]) -> Aggregates:
    """The pure-Python figures of everything written (it drops duplicates itself)."""
    return aggregate_sessions(r for r in records if isinstance(r, dict))
