"""Where finished sessions and dead letters go: the `SessionSink` contract and an in-memory sink.

Finished sessions are JSON (key = `session_id`, so downstream can de-duplicate
replays exactly). A dead letter of a record keeps the record's original bytes
as its key and value and says what went wrong in headers, so it can be
inspected or replayed. A session that can never be sent (its JSON cannot be
encoded, or is larger than a message may be) becomes a dead letter too: one
that *references* the session (stream, session id, first and last offset,
reason) instead of carrying it, so nothing disappears silently.

The contract every sink keeps (DESIGN section 5, "no commit may cover output
that was not durably delivered"): `emit` and `dead_letter` either accept the
item or raise `SinkError`; `flush` returns only once everything accepted since
the previous `flush` is durable, and raises `SinkError` otherwise. After a
`SinkError` the caller must not commit state covering anything given to the
sink since the last successful `flush`.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Final, Protocol, runtime_checkable

from sessionizer.errors import SinkError
from sessionizer.records import FinishedSession

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "BrokerSink",
    "DeadLetter",
    "MemorySink",
    "SessionSink",
    "UnsendableSession",
    "encode_session",
    "session_reference",
]

DEFAULT_MAX_MESSAGE_BYTES: Final = 1_000_000
"""The largest session record a sink sends: below Kafka's default `max.message.bytes`
(1,048,588) with room for the key, headers and batch overhead."""


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A record or session the node could not deliver as such, with the reason."""

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


class UnsendableSession(ValueError):
    """A session no retry can send; `reason`: `session-unencodable` or `session-too-large`."""

    def __init__(self, reason: str, error: str) -> None:
        super().__init__(f"{reason}: {error}")
        self.reason = reason
        self.error = error


@runtime_checkable
class SessionSink(Protocol):
    """Receives a node's output; see the module docstring for the delivery contract."""

    unsendable: Counter[str]
    """Sessions replaced by their reference dead letter, by reason."""

    def emit(self, session: FinishedSession) -> None:
        """Send one finished session (or its reference dead letter if it is unsendable)."""
        ...

    def dead_letter(self, letter: DeadLetter) -> None:
        """Send one dead letter."""
        ...

    def flush(self) -> None:
        """Block until everything sent since the last flush is durable, else raise `SinkError`."""
        ...


# `json.dumps` with any option builds a new encoder per call; one made once encodes the
# same bytes (the encoder keeps no state between calls) without that cost per session.
_SESSION_JSON: Final = json.JSONEncoder(sort_keys=True, default=str, allow_nan=False)


def encode_session(
    session: FinishedSession, *, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
) -> bytes:
    """The JSON bytes of a finished session; raise `UnsendableSession` if there can be none.

    Non-JSON result values become strings; what JSON cannot express at all
    (map keys of mixed types, NaN, a cycle) or a record over `max_bytes` is
    unsendable, which is the same on every replay of the session.
    """
    try:
        text = _SESSION_JSON.encode(session.to_dict())
    except (TypeError, ValueError, RecursionError) as exc:
        raise UnsendableSession("session-unencodable", f"{type(exc).__name__}: {exc}") from exc
    value = text.encode()  # ensure_ascii: plain ASCII
    if len(value) > max_bytes:
        raise UnsendableSession(
            "session-too-large", f"{len(value)} bytes of JSON, over the limit of {max_bytes}"
        )
    return value


def session_reference(session: FinishedSession, reason: str, error: str) -> DeadLetter:
    """The dead letter standing for a session that cannot be sent: where it lies, and why."""
    reference = {
        "stream": session.stream,
        "session_id": session.session_id,
        "key": session.key,
        "first_offset": session.first_offset,
        "last_offset": session.last_offset,
        "fragments": session.fragments,
        "reason": reason,
        "error": error[:2000],
    }
    value = json.dumps(reference, sort_keys=True).encode()
    return DeadLetter(
        session.stream, session.first_offset, reason, error, session.session_id.encode(), value
    )


@dataclass
class MemorySink:
    """A sink that keeps everything in lists: for tests and for embedding."""

    sessions: list[FinishedSession] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    unsendable: Counter[str] = field(default_factory=Counter)

    def emit(self, session: FinishedSession) -> None:
        """Keep one finished session (its reference, if a Kafka sink could not send it)."""
        try:
            encode_session(session, max_bytes=self.max_message_bytes)
        except UnsendableSession as exc:
            self.unsendable[exc.reason] += 1
            self.dead_letters.append(session_reference(session, exc.reason, exc.error))
            return
        self.sessions.append(session)

    def dead_letter(self, letter: DeadLetter) -> None:
        """Keep one dead letter."""
        self.dead_letters.append(letter)

    def flush(self) -> None:
        """Nothing to wait for."""


class BrokerSink(ABC):
    """What the Kafka sinks of both client libraries share: topics, keys, and what stands in
    for an item that can never be sent. Subclasses send and flush."""

    def __init__(
        self,
        sessions_topic: str,
        deadletter_topic: str,
        *,
        delivery_timeout: float,
        max_message_bytes: int,
    ) -> None:
        self.sessions_topic = sessions_topic
        self.deadletter_topic = deadletter_topic
        self.delivery_timeout = delivery_timeout
        self.max_message_bytes = max_message_bytes
        self.unsendable: Counter[str] = Counter()

    def emit(self, session: FinishedSession) -> None:
        """Send one finished session, or its reference dead letter if it can never be sent."""
        try:
            value = encode_session(session, max_bytes=self.max_message_bytes)
        except UnsendableSession as exc:
            self.unsendable[exc.reason] += 1
            self.dead_letter(session_reference(session, exc.reason, exc.error))
            return
        self._send(self.sessions_topic, session.session_id.encode(), value, None, session)

    def dead_letter(self, letter: DeadLetter) -> None:
        """Send one dead letter."""
        self._send(self.deadletter_topic, letter.key, letter.value, letter.headers(), letter)

    @abstractmethod
    def flush(self) -> None:
        """Block until everything sent since the last flush is durable, else raise `SinkError`."""

    @abstractmethod
    def _send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes]] | None,
        item: FinishedSession | DeadLetter,
    ) -> None:
        """Hand one record to the client; `_refused(item, ...)` if it can never take it."""

    def _refused(self, item: FinishedSession | DeadLetter, error: str) -> None:
        """Replace an item the broker can never take by one it can (never the same again)."""
        if isinstance(item, FinishedSession):
            self.unsendable["session-too-large"] += 1
            self.dead_letter(session_reference(item, "session-too-large", error))
        elif item.value is not None:
            note = f"{item.error} [original value of {len(item.value)} bytes dropped: {error}]"
            self.dead_letter(replace(item, error=note, value=None))
        else:
            raise SinkError(
                f"stream {item.stream}: the dead letter of offset {item.offset} is refused even "
                f"without its value ({error}); raise the dead-letter topic's max.message.bytes"
            )
