"""Handover records: an engine's state for the next owner, where it is stored and how it is found.

A *handover record* (`HandoverRecord`) carries one stream's engine state
(opaque bytes, `sessionizer.handover.export_engine`), tied to the stream, the
epoch the next owner must hold and the committed offset it must have loaded.
It is stored in a compacted `<app>.handover` topic keyed by stream
(`HandoverLog`, `state.handover_kafka`), and a *pointer* (`HandoverPointer`:
epoch, committed offset, the record's topic offset, size and checksum) is
written beside the stream in ZooKeeper (`active_streams/<stream>`, key
`"handover"` of its JSON data), after the record is acknowledged and before
the claim is released.

Record layout: one marker byte (`0x00` plain, `0x01` zlib) and a msgpack map
`{"v", "stream", "epoch", "committed", "engine"}`.  `HandoverStore.fetch_many`
(the pointers of many streams in one round trip, their records in one pass over
the log; `fetch` for one stream) gives a record only if the pointer matches what
the caller loaded and the bytes match the pointer's size and checksum; anything
else is a `HandoverMissing` with the reason, and the caller replays.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, TypeGuard

import msgpack

from framework.kernel.errors import StreamError
from framework.kernel.safe_json import loads_object
from state.errors import StateError, caused_by
from state.record import MAX_OFFSET

__all__ = [
    "RECORD_VERSION",
    "HandoverLog",
    "HandoverMissing",
    "HandoverPointer",
    "HandoverPointers",
    "HandoverRecord",
    "HandoverStore",
    "MemoryHandoverLog",
    "MemoryPointers",
    "Written",
    "checksum",
]

RECORD_VERSION: Final = 1
MAX_RECORD_BYTES: Final = 64 * 1024 * 1024
"""The largest handover body, inflated, that `decode` accepts (a bound against zlib bombs)."""
_COMPRESS_ABOVE: Final = 4096
_PLAIN: Final = 0x00
_ZLIB: Final = 0x01
_CHECKSUM: Final = re.compile(r"[0-9a-f]{0,128}")

Reason = Literal["missing", "stale", "corrupt", "unreadable"]


class HandoverMissing(StateError, StreamError):
    """No usable handover record for the stream: it replays from its safe offset."""

    def __init__(self, stream: str, reason: Reason, detail: str) -> None:
        self.reason: Reason = reason
        self.detail = detail
        super().__init__(stream, f"handover {reason} ({detail}); replaying instead")


def checksum(data: bytes) -> str:
    """BLAKE2b-128 of the record bytes, hex: what the pointer holds."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@dataclass(frozen=True)
class HandoverRecord:
    """One stream's engine state, valid for the owner at `epoch` that loaded `committed_offset`."""

    stream: str
    epoch: int
    """The epoch the next owner must hold: the state record's version after the last commit,
    plus one (its take bumps it)."""
    committed_offset: int
    engine: bytes
    version: int = RECORD_VERSION

    def encode(self) -> bytes:
        """Return the record's bytes (zlib-compressed when large)."""
        body: bytes = msgpack.packb(
            {
                "v": self.version,
                "stream": self.stream,
                "epoch": self.epoch,
                "committed": self.committed_offset,
                "engine": self.engine,
            },
            use_bin_type=True,
        )
        if len(body) > _COMPRESS_ABOVE:
            return bytes([_ZLIB]) + zlib.compress(body, 1)
        return bytes([_PLAIN]) + body

    @classmethod
    def decode(cls, data: bytes, *, stream: str) -> HandoverRecord:
        """Parse a record; raise `HandoverMissing("corrupt")` for anything else (any bytes)."""
        try:
            body = data[1:]
            if data[:1] == bytes([_ZLIB]):
                inflater = zlib.decompressobj()
                body = inflater.decompress(body, MAX_RECORD_BYTES)
                if inflater.unconsumed_tail:
                    too_big = f"undecodable record: inflates past {MAX_RECORD_BYTES} bytes"
                    raise HandoverMissing(stream, "corrupt", too_big)
            elif data[:1] != bytes([_PLAIN]):
                unknown = f"undecodable record: unknown marker {data[:1]!r}"
                raise HandoverMissing(stream, "corrupt", unknown)
            fields = msgpack.unpackb(body, raw=False)
        except (ValueError, TypeError, zlib.error, msgpack.UnpackException) as exc:
            raise HandoverMissing(stream, "corrupt", f"undecodable record: {exc!r}") from exc
        problem = _record_problem(fields, stream)
        if problem is not None:
            raise HandoverMissing(stream, "corrupt", problem)
        return cls(
            fields["stream"], fields["epoch"], fields["committed"], fields["engine"], fields["v"]
        )


@dataclass(frozen=True)
class HandoverPointer:
    """Where a stream's latest handover record is, and what it is for."""

    epoch: int
    committed_offset: int
    offset: int
    """The record's offset in the handover topic."""
    size: int
    checksum: str

    def to_json(self) -> dict[str, Any]:
        """The pointer as stored (a JSON object)."""
        return {
            "epoch": self.epoch,
            "committed": self.committed_offset,
            "offset": self.offset,
            "size": self.size,
            "checksum": self.checksum,
        }

    @classmethod
    def from_json(cls, value: Any) -> HandoverPointer | None:
        """The pointer from its JSON object; None if it is absent or not one (never raises).

        No conversions: the numbers must be integers in [0, 2**63-1] (an `Infinity` or a
        float is not a pointer) and the checksum a short hex string (`fetch` compares it).
        """
        if not isinstance(value, dict):
            return None
        numbers = [value.get(name) for name in ("epoch", "committed", "offset", "size")]
        offsets = [number for number in numbers if _is_offset(number)]
        digest = value.get("checksum")
        if len(offsets) != 4 or not isinstance(digest, str) or not _CHECKSUM.fullmatch(digest):
            return None
        epoch, committed, offset, size = offsets
        return cls(epoch, committed, offset, size, digest)


def _record_problem(fields: object, stream: str) -> str | None:
    """What makes a decoded record body not a record of `stream` (None: it is one)."""
    if not isinstance(fields, dict):
        return f"the record is a {type(fields).__name__}, not a map"
    version = fields.get("v")
    if type(version) is not int or version != RECORD_VERSION:
        return f"record version {str(version)[:20]}, not {RECORD_VERSION}"
    if fields.get("stream") != stream:
        return f"record of stream {str(fields.get('stream'))[:100]!r}"
    if not _is_offset(fields.get("epoch")) or not _is_offset(fields.get("committed")):
        return "its epoch or committed offset is not an integer in [0, 2**63-1]"
    if not isinstance(fields.get("engine"), bytes):
        return "engine state is not bytes"
    return None


def _is_offset(value: object) -> TypeGuard[int]:
    """True for an int (not a bool) in [0, `MAX_OFFSET`]."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_OFFSET


Written = int | StateError
"""One record's outcome: its offset once durably acknowledged, or why it is not."""


class HandoverLog(Protocol):
    """Where the records are (the `<app>.handover` topic, keyed by stream)."""

    def write_many(self, records: Sequence[tuple[str, bytes]], timeout: float) -> list[Written]:
        """Send every (stream, bytes) record, then wait once, `timeout` in all, for them to be
        durably acknowledged; per record, in order, its offset or the `StateError` why not."""
        ...

    def read_many(
        self, wanted: Mapping[str, int], timeout: float
    ) -> dict[str, bytes | StateError | None]:
        """Each stream's record at its offset, all read in one pass within `timeout`: the
        bytes if it is the stream's (None: gone or another's), or why it was not read."""
        ...


class HandoverPointers(Protocol):
    """Where the pointers are (beside the stream's registration in ZooKeeper)."""

    def write(self, stream: str, pointer: HandoverPointer) -> None:
        """Store the stream's pointer, replacing the previous one."""
        ...

    def write_many(
        self, pointers: Mapping[str, HandoverPointer], timeout: float
    ) -> dict[str, StateError | None]:
        """Store several streams' pointers in as few round trips as possible, within `timeout`;
        the outcome per stream (None: written)."""
        ...

    def read_many(self, streams: Sequence[str]) -> dict[str, HandoverPointer | StateError | None]:
        """Each stream's pointer (None: none), or why it was not read, in one round trip."""
        ...

    def resumed_many(
        self, notes: Mapping[str, dict[str, Any]], timeout: float
    ) -> dict[str, StateError | None]:
        """Record how each stream was last resumed (`sessionizer status` shows it), in as few
        round trips as possible, within `timeout`; the outcome per stream (None: written)."""
        ...


class HandoverStore:
    """Records in a `HandoverLog`, pointers in `HandoverPointers`: what the node uses."""

    def __init__(
        self, log: HandoverLog, pointers: HandoverPointers, *, timeout: float = 5.0
    ) -> None:
        self.log = log
        self.pointers = pointers
        self.timeout = timeout
        """Longest wait for the record's acknowledgement, or for reading it back."""

    def put(self, record: HandoverRecord, *, timeout: float | None = None) -> HandoverPointer:
        """Write the record, then (acknowledged) the pointer; return the pointer (else raise)."""
        outcome = self.put_many([record], timeout=timeout)[record.stream]
        if isinstance(outcome, StateError):
            raise outcome
        return outcome

    def put_many(
        self, records: Sequence[HandoverRecord], *, timeout: float | None = None
    ) -> dict[str, HandoverPointer | StateError]:
        """Write all the records and wait for their acknowledgements once, then the pointers of
        the acknowledged ones; per stream its pointer, or the `StateError` why it has none.

        A pointer is only written for a record that was durably acknowledged, and all of it
        happens within one `timeout`: a stream whose record or pointer failed is replayed.
        """
        if not records:
            return {}
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        encoded = [(record, record.encode()) for record in records]
        written = self.log.write_many(
            [(record.stream, data) for record, data in encoded],
            max(0.0, deadline - time.monotonic()),
        )
        outcomes: dict[str, HandoverPointer | StateError] = {}
        pointers: dict[str, HandoverPointer] = {}
        for (record, data), offset in zip(encoded, written, strict=True):
            if isinstance(offset, StateError):
                outcomes[record.stream] = offset
                continue
            pointers[record.stream] = HandoverPointer(
                record.epoch, record.committed_offset, offset, len(data), checksum(data)
            )
        left = deadline - time.monotonic()
        if pointers and left <= 0:
            for stream in pointers:
                outcomes[stream] = StateError(
                    f"stream {stream}: handover pointer not written, no time left; "
                    "the next owner replays"
                )
            return outcomes
        stored = self.pointers.write_many(pointers, left) if pointers else {}
        for stream, pointer in pointers.items():
            if stream not in stored:
                outcomes[stream] = StateError(f"stream {stream}: handover pointer not confirmed")
                continue
            error = stored[stream]
            outcomes[stream] = pointer if error is None else error
        return outcomes

    def fetch(
        self, stream: str, epoch: int, committed_offset: int, *, timeout: float | None = None
    ) -> HandoverRecord:
        """The record for the owner at `epoch` that loaded `committed_offset`, checked.

        Raise `HandoverMissing` when there is none, it is for another epoch or
        offset, it cannot be read in time, or its bytes do not match the pointer.
        """
        outcome = self.fetch_many({stream: (epoch, committed_offset)}, timeout=timeout)[stream]
        if isinstance(outcome, HandoverMissing):
            raise outcome
        return outcome

    def fetch_many(
        self, wanted: Mapping[str, tuple[int, int]], *, timeout: float | None = None
    ) -> dict[str, HandoverRecord | HandoverMissing]:
        """`fetch` for each stream's (epoch, committed offset): the pointers read in one round
        trip, the records in one pass over the log; per stream the record or why not."""
        outcomes: dict[str, HandoverRecord | HandoverMissing] = {}
        pointers: dict[str, HandoverPointer] = {}
        for stream, pointer in self.pointers.read_many(list(wanted)).items():
            usable = _pointer_for(stream, pointer, *wanted[stream])
            if isinstance(usable, HandoverMissing):
                outcomes[stream] = usable
            else:
                pointers[stream] = usable
        if pointers:
            offsets = {stream: pointer.offset for stream, pointer in pointers.items()}
            read = self.log.read_many(offsets, self.timeout if timeout is None else timeout)
            for stream, pointer in pointers.items():
                outcomes[stream] = _checked(stream, pointer, read[stream])
        return outcomes


def _missing(
    stream: str, reason: Reason, detail: str, cause: BaseException | None = None
) -> HandoverMissing:
    return caused_by(HandoverMissing(stream, reason, detail), cause)


def _pointer_for(
    stream: str, pointer: HandoverPointer | StateError | None, epoch: int, committed_offset: int
) -> HandoverPointer | HandoverMissing:
    """The stream's pointer if it names the record for `epoch` and `committed_offset`."""
    if isinstance(pointer, StateError):
        return _missing(stream, "unreadable", f"pointer: {pointer}", pointer)
    if pointer is None:
        return _missing(stream, "missing", "no pointer")
    if (pointer.epoch, pointer.committed_offset) != (epoch, committed_offset):
        found = f"epoch {pointer.epoch}, committed offset {pointer.committed_offset}"
        wanted = f"epoch {epoch}, committed offset {committed_offset}"
        return _missing(stream, "stale", f"pointer is for {found}, not {wanted}")
    return pointer


def _checked(
    stream: str, pointer: HandoverPointer, data: bytes | StateError | None
) -> HandoverRecord | HandoverMissing:
    """The record read at the pointer, if its bytes are the pointer's and it is for its epoch
    and committed offset."""
    if isinstance(data, StateError):
        return _missing(stream, "unreadable", str(data), data)
    if data is None:
        return _missing(stream, "missing", f"no record at offset {pointer.offset}")
    if len(data) != pointer.size or checksum(data) != pointer.checksum:
        return _missing(stream, "corrupt", "record does not match the pointer's checksum")
    try:
        record = HandoverRecord.decode(data, stream=stream)
    except HandoverMissing as corrupt:
        return corrupt
    if (record.epoch, record.committed_offset) != (pointer.epoch, pointer.committed_offset):
        return _missing(stream, "stale", "record is for another epoch or offset")
    return record


class MemoryHandoverLog:
    """An in-memory `HandoverLog` (tests): one append-only list, like a topic partition."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.records: list[tuple[str, bytes]] = []

    def write_many(self, records: Sequence[tuple[str, bytes]], timeout: float) -> list[Written]:
        """Append each; return their offsets (or the `StateError` a test's `write` raised)."""
        outcomes: list[Written] = []
        for stream, data in records:
            try:
                outcomes.append(self.write(stream, data))
            except StateError as exc:
                outcomes.append(exc)
        return outcomes

    def write(self, stream: str, data: bytes) -> int:
        """Append one record; return its offset."""
        with self._lock:
            self.records.append((stream, data))
            return len(self.records) - 1

    def read(self, stream: str, offset: int, timeout: float) -> bytes | None:
        """The record at `offset` if it is the stream's."""
        with self._lock:
            if not 0 <= offset < len(self.records) or self.records[offset][0] != stream:
                return None
            return self.records[offset][1]

    def read_many(
        self, wanted: Mapping[str, int], timeout: float
    ) -> dict[str, bytes | StateError | None]:
        """Each stream's `read` (or the `StateError` a test's `read` raised)."""
        outcomes: dict[str, bytes | StateError | None] = {}
        for stream, offset in wanted.items():
            try:
                outcomes[stream] = self.read(stream, offset, timeout)
            except StateError as exc:
                outcomes[stream] = exc
        return outcomes


class MemoryPointers:
    """In-memory `HandoverPointers` (tests)."""

    def __init__(self) -> None:
        self.pointers: dict[str, str] = {}
        self.notes: dict[str, dict[str, Any]] = {}

    def write(self, stream: str, pointer: HandoverPointer) -> None:
        """Store the pointer (as the JSON text ZooKeeper would hold)."""
        self.pointers[stream] = json.dumps(pointer.to_json())

    def write_many(
        self, pointers: Mapping[str, HandoverPointer], timeout: float
    ) -> dict[str, StateError | None]:
        """Store each pointer."""
        outcomes: dict[str, StateError | None] = {}
        for stream, pointer in pointers.items():
            self.write(stream, pointer)
            outcomes[stream] = None
        return outcomes

    def read(self, stream: str) -> HandoverPointer | None:
        """The stream's pointer, if any."""
        text = self.pointers.get(stream)
        return None if text is None else HandoverPointer.from_json(loads_object(text))

    def read_many(self, streams: Sequence[str]) -> dict[str, HandoverPointer | StateError | None]:
        """Each stream's `read`."""
        return {stream: self.read(stream) for stream in streams}

    def resumed_many(
        self, notes: Mapping[str, dict[str, Any]], timeout: float
    ) -> dict[str, StateError | None]:
        """Keep the notes."""
        self.notes.update((stream, dict(note)) for stream, note in notes.items())
        return dict.fromkeys(notes)
