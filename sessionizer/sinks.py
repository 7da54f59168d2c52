"""Where finished sessions and dead letters go: a `SessionSink` protocol and its Kafka sink.

Finished sessions are JSON (key = `session_id`, so downstream can de-duplicate
replays exactly).  A dead letter keeps the original record bytes as its key and
value and says what went wrong in headers, so it can be inspected or replayed.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from kafka import KafkaProducer
from kafka.errors import KafkaError

from sessionizer.errors import SinkError
from sessionizer.records import FinishedSession

__all__ = ["DeadLetter", "KafkaSink", "MemorySink", "SessionSink", "encode_session"]


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A record the node could not sessionize, with the reason and its original bytes."""

    stream: str
    offset: int
    reason: str
    error: str
    key: bytes | None
    value: bytes | None

    def headers(self) -> list[tuple[str, bytes]]:
        """Kafka headers describing the failure."""
        return [
            ("stream", self.stream.encode()),
            ("offset", str(self.offset).encode()),
            ("reason", self.reason.encode()),
            ("error", self.error.encode("utf-8", "replace")[:2000]),
        ]


@runtime_checkable
class SessionSink(Protocol):
    """Receives a node's output; `flush` returns once everything given is durable."""

    def emit(self, session: FinishedSession) -> None:
        """Send one finished session."""
        ...

    def dead_letter(self, letter: DeadLetter) -> None:
        """Send one dead letter."""
        ...

    def flush(self) -> None:
        """Block until everything sent so far is durable; raise `SinkError` if it is not."""
        ...


def encode_session(session: FinishedSession) -> bytes:
    """The JSON bytes of a finished session (non-JSON result values become strings)."""
    return json.dumps(session.to_dict(), sort_keys=True, default=str).encode()


class KafkaSink:
    """Writes sessions to `sessions_topic` and dead letters to `deadletter_topic`."""

    def __init__(
        self, bootstrap: str, sessions_topic: str, deadletter_topic: str, *, client_id: str
    ) -> None:
        self.sessions_topic = sessions_topic
        self.deadletter_topic = deadletter_topic
        self._lock = threading.Lock()  # delivery callbacks run on kafka-python's thread
        self._failures: list[str] = []
        self._producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            enable_idempotence=True,
            linger_ms=20,
            compression_type="lz4",
            client_id=client_id,
        )

    def emit(self, session: FinishedSession) -> None:
        """Send one finished session (asynchronously; see `flush`)."""
        future = self._producer.send(
            self.sessions_topic, key=session.session_id.encode(), value=encode_session(session)
        )
        future.add_errback(self._failed)

    def dead_letter(self, letter: DeadLetter) -> None:
        """Send one dead letter (asynchronously; see `flush`)."""
        future = self._producer.send(
            self.deadletter_topic, key=letter.key, value=letter.value, headers=letter.headers()
        )
        future.add_errback(self._failed)

    def flush(self) -> None:
        """Wait until every send is acknowledged by all in-sync replicas."""
        try:
            self._producer.flush()
        except KafkaError as exc:
            raise SinkError(f"flushing sessions to {self.sessions_topic} failed: {exc}") from exc
        with self._lock:
            failures, self._failures = self._failures, []
        if failures:
            raise SinkError(
                f"{len(failures)} sends to {self.sessions_topic}/{self.deadletter_topic} failed "
                f"(first: {failures[0]}); state is not committed, so they will be replayed"
            )

    def close(self) -> None:
        """Close the producer (after a final flush by the caller)."""
        self._producer.close(timeout=10)

    def _failed(self, exc: BaseException) -> None:
        with self._lock:
            self._failures.append(repr(exc))


@dataclass
class MemorySink:
    """A sink that keeps everything in lists: for tests and for embedding."""

    sessions: list[FinishedSession] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)

    def emit(self, session: FinishedSession) -> None:
        """Keep one finished session."""
        self.sessions.append(session)

    def dead_letter(self, letter: DeadLetter) -> None:
        """Keep one dead letter."""
        self.dead_letters.append(letter)

    def flush(self) -> None:
        """Nothing to wait for."""
