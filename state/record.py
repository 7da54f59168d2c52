"""`StreamState`, the record a stream's owner persists, and its byte encoding.

Layout: one marker byte (`0x00` plain, `0x01` zlib) followed by a msgpack map::

    {"v": format version, "stream": name, "epoch": lease epoch,
     "safe": safe offset, "committed": read position at the commit,
     "time": stream time as of the safe offset (ms) or nil,
     "ignore": [[key, first_ts, last_ts, last_offset, tail_offset], ...],
     "blob": user bytes or nil, "open": open sessions at the commit}

An empty or absent record means "never committed": start from offset 0.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any, Final

import msgpack

from state.errors import CorruptStateError, StateTooLargeError

__all__ = [
    "COMPRESS_ABOVE_BYTES",
    "DEFAULT_LIMIT_BYTES",
    "FORMAT_VERSION",
    "JUTE_MAXBUFFER",
    "IgnoreEntry",
    "StreamState",
]

FORMAT_VERSION: Final = 1
JUTE_MAXBUFFER: Final = 0xFFFFF
"""ZooKeeper's default `jute.maxbuffer` (1,048,575 bytes): the largest znode it accepts."""
DEFAULT_LIMIT_BYTES: Final = 1_000_000
"""Default size limit of an encoded record: below `jute.maxbuffer`, leaving room for framing."""
COMPRESS_ABOVE_BYTES: Final = 1024
"""Records larger than this are zlib-compressed (ignore lists repeat keys and nearby numbers)."""

_PLAIN: Final = 0x00
_ZLIB: Final = 0x01


@dataclass(frozen=True, slots=True)
class IgnoreEntry:
    """A finished session that a replay from the safe offset will meet again, and must skip."""

    key: str
    first_ts: int
    last_ts: int
    last_offset: int
    tail_offset: int
    """Offset of the session's last fragment in event-time order (its END fragment, if any)."""

    def covers(self, offset: int, timestamp_ms: int) -> bool:
        """Return True if a fragment of this key at `offset`/`timestamp_ms` belonged here."""
        if offset > self.last_offset or not self.first_ts <= timestamp_ms <= self.last_ts:
            return False
        # A new session of the same key may start at the very millisecond an END fragment
        # closed this one; event-time order puts it after the END, i.e. at a larger offset.
        return timestamp_ms < self.last_ts or offset <= self.tail_offset

    def to_list(self) -> list[Any]:
        """Return the compact form stored in the record."""
        return [self.key, self.first_ts, self.last_ts, self.last_offset, self.tail_offset]


@dataclass(frozen=True, slots=True)
class StreamState:
    """What a stream's owner persists: where to resume and what to skip when it does."""

    stream: str
    epoch: int = 0
    safe_offset: int = 0
    committed_offset: int = 0
    stream_time_ms: int | None = None
    """Stream time just before the record at `safe_offset` (None: nothing seen yet)."""
    ignore: tuple[IgnoreEntry, ...] = ()
    user_blob: bytes | None = None
    open_sessions: int = 0
    """Sessions open at the commit (for `status`; a replay re-opens them from the log)."""
    format_version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        if not 0 <= self.safe_offset <= self.committed_offset:
            raise ValueError(
                f"stream {self.stream}: need 0 <= safe_offset ({self.safe_offset}) "
                f"<= committed_offset ({self.committed_offset})"
            )

    @classmethod
    def initial(cls, stream: str, epoch: int = 0) -> StreamState:
        """Return the state of a stream that was never committed: start from offset 0."""
        return cls(stream=stream, epoch=epoch)

    def encode(self, *, limit: int | None = None) -> bytes:
        """Return the record's bytes; raise `StateTooLargeError` if they exceed `limit`."""
        body = msgpack.packb(
            {
                "v": self.format_version,
                "stream": self.stream,
                "epoch": self.epoch,
                "safe": self.safe_offset,
                "committed": self.committed_offset,
                "time": self.stream_time_ms,
                "ignore": [entry.to_list() for entry in self.ignore],
                "blob": self.user_blob,
                "open": self.open_sessions,
            },
            use_bin_type=True,
        )
        data = bytes([_PLAIN]) + body
        if len(body) > COMPRESS_ABOVE_BYTES:
            data = bytes([_ZLIB]) + zlib.compress(body, 6)
        if limit is not None and len(data) > limit:
            raise StateTooLargeError(
                self.stream, size=len(data), limit=limit, entries=len(self.ignore)
            )
        return data

    @classmethod
    def decode(cls, data: bytes | None, *, stream: str) -> StreamState:
        """Decode a record of `stream`; empty or absent data is the initial state."""
        if not data:
            return cls.initial(stream)
        marker, payload = data[0], data[1:]
        try:
            if marker == _ZLIB:
                payload = zlib.decompress(payload)
            elif marker != _PLAIN:
                raise CorruptStateError(stream, f"unknown marker byte {marker:#04x}")
            fields = msgpack.unpackb(payload, raw=False)
        except (zlib.error, ValueError, msgpack.ExtraData, msgpack.FormatError) as exc:
            raise CorruptStateError(stream, f"{type(exc).__name__}: {exc}") from exc
        return _from_fields(fields, stream)


def _from_fields(fields: Any, stream: str) -> StreamState:
    if not isinstance(fields, dict):
        raise CorruptStateError(stream, f"expected a map, got {type(fields).__name__}")
    version = fields.get("v")
    if version != FORMAT_VERSION:
        raise CorruptStateError(
            stream, f"format version {version!r}; this code reads version {FORMAT_VERSION}"
        )
    if fields.get("stream") != stream:
        raise CorruptStateError(stream, f"the record belongs to stream {fields.get('stream')!r}")
    try:
        ignore = tuple(
            IgnoreEntry(str(key), int(first), int(last), int(last_off), int(tail))
            for key, first, last, last_off, tail in fields["ignore"]
        )
        time = fields["time"]
        blob = fields["blob"]
        return StreamState(
            stream=stream,
            epoch=int(fields["epoch"]),
            safe_offset=int(fields["safe"]),
            committed_offset=int(fields["committed"]),
            stream_time_ms=None if time is None else int(time),
            ignore=ignore,
            user_blob=None if blob is None else bytes(blob),
            open_sessions=int(fields["open"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptStateError(stream, f"bad field: {type(exc).__name__}: {exc}") from exc
