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
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields, replace
from datetime import date, datetime, time
from decimal import Decimal
from json import encoder as json_encoder
from typing import Any, Final, Protocol, runtime_checkable

from framework.kernel import compiled
from framework.kernel.errors import InvalidArgument
from framework.kernel.frozen import slot_descriptors
from sessionizer.errors import SessionError, SinkError
from sessionizer.records import FIXED_FIELDS, FinishedSession

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "ERROR_HEADER_PREFIX",
    "PAYLOAD_NONE",
    "PAYLOAD_ORIGINAL",
    "PAYLOAD_REENCODED",
    "PAYLOAD_REFERENCE",
    "BrokerSink",
    "DeadLetter",
    "MemorySink",
    "SessionSink",
    "UnsendableSession",
    "encode_session",
    "json_fallback",
    "native_session_json",
    "session_reference",
]

DEFAULT_MAX_MESSAGE_BYTES: Final = 1_000_000
"""The largest session record a sink sends: below Kafka's default `max.message.bytes`
(1,048,588) with room for the key, headers and batch overhead."""


ERROR_HEADER_PREFIX: Final = "sessionizer.errors."
"""Prefix of the headers describing a dead letter (after Kafka Connect's `__connect.errors.`)."""
_MAX_MESSAGE_HEADER: Final = 2_000
_MAX_TRACE_HEADER: Final = 8_000

PAYLOAD_ORIGINAL: Final = "original"
"""The dead letter's key and value are the record's bytes as read from the stream."""
PAYLOAD_REENCODED: Final = "re-encoded"
"""Key and value re-encoded from the decoded fragment (the node no longer held its bytes; the
wire format is deterministic, and the stream offset names the record itself)."""
PAYLOAD_NONE: Final = "none"
"""No value: the fragment was folded before its session failed; re-read it at its offset."""
PAYLOAD_REFERENCE: Final = "reference"
"""The value is a JSON reference to a session that could not be sent (`session_reference`)."""


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A record or session the node could not deliver as such, with the reason."""

    stream: str
    offset: int
    reason: str
    error: str
    key: bytes | None
    value: bytes | None
    timestamp_ms: int | None = None
    """The original record's timestamp (a fragment's record timestamp), when known."""
    last_offset: int | None = None
    """A session's last offset (`offset` is its first)."""
    session_key: str | None = None
    session_id: str | None = None
    """The session lost with this fragment (hook failures of open/update/close), or referenced."""
    exception: str = ""
    """The exception's class name, when an exception caused it."""
    traceback: str = field(default="", compare=False, repr=False)
    """Where it was raised (diagnostics: not part of the dead letter's identity)."""
    payload: str = PAYLOAD_ORIGINAL
    """What `key` and `value` hold: one of the `PAYLOAD_*` values."""

    def headers(self) -> list[tuple[str, bytes]]:
        """Kafka headers describing the failure (docs/deadletters.md)."""
        # The four plain headers came first and stay; the rest follow Kafka Connect's
        # dead-letter convention (`__connect.errors.*`) under our own prefix.
        headers = [
            ("stream", self.stream.encode()),
            ("offset", str(self.offset).encode()),
            ("reason", self.reason.encode()),
            ("error", _clip(self.error, _MAX_MESSAGE_HEADER)),
        ]
        fields: list[tuple[str, str | None]] = [
            ("topic", self.stream),
            ("partition", "0"),
            ("offset", str(self.offset)),
            ("offset.last", None if self.last_offset is None else str(self.last_offset)),
            ("timestamp", None if self.timestamp_ms is None else str(self.timestamp_ms)),
            ("reason", self.reason),
            ("stage", self.reason.split(":", 1)[0]),
            ("key", self.session_key),
            ("session.id", self.session_id),
            ("payload", self.payload),
            ("exception.class.name", self.exception or None),
            ("exception.message", self.error),
            ("exception.stacktrace", self.traceback or None),
        ]
        for name, text in fields:
            if text is not None:
                limit = _MAX_TRACE_HEADER if name.endswith("stacktrace") else _MAX_MESSAGE_HEADER
                headers.append((ERROR_HEADER_PREFIX + name, _clip(text, limit)))
        return headers

    @classmethod
    def from_record(
        cls, key: bytes | None, value: bytes | None, headers: Iterable[tuple[str, bytes]] | None
    ) -> DeadLetter:
        """Read a dead letter back from a record of the dead-letter topic (`headers()`'s inverse).

        Raises `InvalidArgument` (a `ValueError`) for a record without the headers a node
        writes.
        """
        found: dict[str, str] = {}
        for name, raw in headers or ():
            if isinstance(name, str) and isinstance(raw, bytes):
                found.setdefault(name, raw.decode("utf-8", "replace"))

        def get(name: str) -> str | None:
            return found.get(ERROR_HEADER_PREFIX + name)

        stream = get("topic") or found.get("stream")
        offset = get("offset") or found.get("offset")
        reason = get("reason") or found.get("reason")
        if stream is None or offset is None or reason is None:
            raise InvalidArgument("not a dead letter: no stream, offset and reason headers")
        last, stamp = get("offset.last"), get("timestamp")
        return cls(
            stream=stream,
            offset=int(offset),
            reason=reason,
            error=get("exception.message") or found.get("error", ""),
            key=key,
            value=value,
            timestamp_ms=None if stamp is None else int(stamp),
            last_offset=None if last is None else int(last),
            session_key=get("key"),
            session_id=get("session.id"),
            exception=get("exception.class.name") or "",
            traceback=get("exception.stacktrace") or "",
            payload=get("payload") or PAYLOAD_ORIGINAL,
        )


def _clip(text: str, limit: int) -> bytes:
    """UTF-8 bytes of `text`, at most `limit` of them (a header stays small)."""
    data = text.encode("utf-8", "replace")
    return data if len(data) <= limit else data[:limit].decode("utf-8", "ignore").encode()


class UnsendableSession(SessionError, ValueError):
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


def json_fallback(value: object) -> object:
    """The JSON form of a result value JSON has no type for; `TypeError` for the rest.

    Deterministic, so every emission of a session is the same bytes: a set or
    frozenset of strings only, or of numbers only, is a sorted list; a date, time
    or datetime is its ISO 8601 text (`isoformat()`); a `Decimal` is its string.
    (Tuples are JSON arrays already.) Anything else, a set of mixed or unordered
    members included, makes the session `session-unencodable`.
    """
    if isinstance(value, set | frozenset):
        if all(isinstance(member, str) for member in value) or all(
            isinstance(member, int | float) for member in value
        ):
            return sorted(value)
        raise TypeError(
            f"a {type(value).__name__} of mixed or unordered members has no deterministic "
            "JSON form; return a sorted list"
        )
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    raise TypeError(
        f"Object of type {type(value).__name__} is not JSON serializable (docs/sessions.md: "
        "what close() may return)"
    )


# `json.dumps` with any option builds a new encoder per call; one made once encodes the
# same bytes (the encoder keeps no state between calls) without that cost per session.
_SESSION_JSON: Final = json.JSONEncoder(sort_keys=True, default=json_fallback, allow_nan=False)
_C_ENCODER: Final = getattr(json_encoder, "c_make_encoder", None)  # None without CPython's _json


_NATIVE_JSON: Final[Any] = compiled.native("_sessionizer_json")
"""The native fast path of a session's JSON on the compiled hot path (sessionizer/native):
the same bytes for the plain values it handles, None for the rest, which `_session_json`,
the reference, encodes (tests/unit/test_native_json.py)."""


def native_session_json(native: Any) -> Callable[[FinishedSession], bytes | None]:
    """`native.session_json(session.to_dict())`, read from the session's slots without
    building the dict (it cost as much as the JSON: benchmarks/HOT_PATH.md, round 12);
    `native` is the build's `_sessionizer_json`."""
    names = [item.name for item in fields(FinishedSession)]
    slots = dict(zip(names, slot_descriptors(FinishedSession), strict=True))
    fixed = [(name, slots[name]) for name in FIXED_FIELDS]
    encode: Callable[[FinishedSession], bytes | None] = native.SessionJson(
        slots["result"], slots["truncated"], fixed
    )
    return encode


_NATIVE_SESSION_JSON: Final = None if _NATIVE_JSON is None else native_session_json(_NATIVE_JSON)


def _session_json(value: dict[str, Any]) -> str:
    """`_SESSION_JSON.encode(value)`, through CPython's C encoder called directly.

    `JSONEncoder.encode` wraps that encoder in Python frames and a closure on every
    call, a quarter of a session's encoding time; the C encoder made here with the same
    settings writes the same text. It is made per call, as `encode` makes it: its
    circular-reference marks (which an exception leaves behind) stay the call's own.
    """
    if _C_ENCODER is None:
        return _SESSION_JSON.encode(value)
    ascii_only = json_encoder.encode_basestring_ascii
    encode = _C_ENCODER({}, json_fallback, ascii_only, None, ": ", ", ", True, False, False)
    return "".join(encode(value, 0))


def encode_session(
    session: FinishedSession, *, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
) -> bytes:
    """The JSON bytes of a finished session; raise `UnsendableSession` if there can be none.

    Values JSON has no type for take the deterministic form of `json_fallback`
    (sets, dates, decimals) or make the session unsendable, as does what JSON
    cannot express at all (map keys of mixed types, NaN, a cycle) and a record
    over `max_bytes`; the same on every replay of the session.
    """
    value = None if _NATIVE_SESSION_JSON is None else _NATIVE_SESSION_JSON(session)
    if value is None:  # its result is not a plain dict, say, or holds what JSON has no type for
        data = session.to_dict()
        value = None if _NATIVE_JSON is None else _NATIVE_JSON.session_json(data)
        if value is None:
            try:
                text = _session_json(data)
            except (TypeError, ValueError, RecursionError) as exc:
                reason = f"{type(exc).__name__}: {exc}"
                raise UnsendableSession("session-unencodable", reason) from exc
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
        session.stream,
        session.first_offset,
        reason,
        error,
        session.session_id.encode(),
        value,
        last_offset=session.last_offset,
        session_key=session.key,
        session_id=session.session_id,
        exception=error.split(":", 1)[0] if reason == "session-unencodable" else "",
        payload=PAYLOAD_REFERENCE,
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
            self.dead_letter(replace(item, error=note, value=None, payload=PAYLOAD_NONE))
        else:
            raise SinkError(
                f"stream {item.stream}: the dead letter of offset {item.offset} is refused even "
                f"without its value ({error}); raise the dead-letter topic's max.message.bytes"
            )
