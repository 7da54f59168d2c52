"""Processors used only by the tests (node processes import them by module name).

Node processes load them as `framework.testing.processors:NAME`.  Each is a
`WebSessions` with one deliberate fault; the helpers (`unsendable_kind`, the
marker paths, the gate) are shared with the tests that check the outcome.
"""

from __future__ import annotations

import hashlib
import os
import select
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from sessionizer.examples.weblog import Visit, WebSessions

__all__ = [
    "GATE_ENV",
    "HOOK_POISON_PATH",
    "TOO_LARGE_BYTES",
    "FragileWebSessions",
    "GatedWebSessions",
    "RaisingWebSessions",
    "TimestampPoisonWebSessions",
    "UnsendableWebSessions",
    "raising_key",
    "unsendable_kind",
]

HOOK_POISON_PATH = "/__poison_timestamp__"
"""A fragment with this path makes `TimestampPoisonWebSessions.timestamp` return > 2**63."""

TOO_LARGE_BYTES = 2_000_000
"""The size of the string `UnsendableWebSessions` puts into a too-large result (broker: ~1 MB)."""

GATE_ENV = "SESSIONIZER_TEST_GATE"
"""Environment variable naming the gate file of `GatedWebSessions`."""

Unsendable = Literal["too-large", "unencodable"]


class FragileWebSessions(WebSessions):
    """WebSessions whose `update` raises on the path `/poison`: a poison fragment."""

    def update(self, session: Any, fragment: Mapping[str, Any]) -> Any | None:
        """Fail on purpose for the poison path."""
        if fragment.get("path") == "/poison":
            raise ValueError("poison fragment")  # a user's bug, as a user's code raises it
        return super().update(session, fragment)


class TimestampPoisonWebSessions(WebSessions):
    """WebSessions whose `timestamp` hook returns 2**64 (beyond int64) for `HOOK_POISON_PATH`."""

    def timestamp(self, fragment: Mapping[str, Any], record_timestamp_ms: int) -> int:
        """The record timestamp, except an out-of-range event time for the marker path."""
        if fragment.get("path") == HOOK_POISON_PATH:
            return 2**64
        return record_timestamp_ms


def unsendable_kind(key: str) -> Unsendable | None:
    """Which keys' sessions `UnsendableWebSessions` makes unsendable (about 1 in 97 each)."""
    digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    bucket = int.from_bytes(digest, "big") % 97
    kinds: dict[int, Unsendable] = {0: "too-large", 1: "unencodable"}
    return kinds.get(bucket)


class UnsendableWebSessions(WebSessions):
    """WebSessions whose `close()` gives a result that can never be sent, for some keys.

    `unsendable_kind(key)` decides: `"too-large"` adds a 2 MB string (the broker
    takes about 1 MB), `"unencodable"` adds an integer key next to the string keys
    (`{200: 3, "x": 1}`), which JSON with sorted keys cannot encode.
    """

    def close(self, key: str, session: Visit) -> dict[str, Any]:
        """The visit, made unsendable for the chosen keys."""
        result: dict[Any, Any] = super().close(key, session)
        kind = unsendable_kind(key)
        if kind == "too-large":
            result["padding"] = "x" * TOO_LARGE_BYTES
        elif kind == "unencodable":
            result[200] = 3
        return result


class Gate:
    """A named pipe the test holds open: `GatedWebSessions.close()` blocks on it until `open()`.

    A real wait, not a poll: a reader of a FIFO blocks while a writer holds it
    and nothing is written, and sees end-of-file the moment the last writer closes.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._writer: int | None = None

    def close(self) -> None:
        """From now on, a node's `close()` hook waits here."""
        os.mkfifo(self.path)
        self._writer = os.open(self.path, os.O_RDWR | os.O_NONBLOCK)

    def __enter__(self) -> Gate:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.open()  # never leave a node waiting, nor the pipe behind, whatever happened

    def open(self) -> None:
        """Let every waiting hook through, and all later ones pass straight on."""
        self.path.unlink(missing_ok=True)
        if self._writer is not None:
            os.close(self._writer)
            self._writer = None


class GatedWebSessions(WebSessions):
    """WebSessions whose `close()` waits while the `Gate` (path in env `GATE_ENV`) is closed.

    The first time it waits it creates `<gate>.blocked.<pid>`, so a test knows
    the node is holding finished output it has not sent yet.  The wait is
    bounded (60 s) and changes no result: the hooks stay deterministic.
    """

    def close(self, key: str, session: Visit) -> dict[str, Any]:
        """Wait at the gate (if any), then return the visit."""
        gate = os.environ.get(GATE_ENV)
        if gate and Path(gate).exists():
            Path(f"{gate}.blocked.{os.getpid()}").touch()
            try:
                reader = os.open(gate, os.O_RDONLY | os.O_NONBLOCK)
            except FileNotFoundError:
                reader = None  # opened between the check and here
            if reader is not None:
                try:
                    select.select([reader], [], [], 60)  # readable at the writer's close
                finally:
                    os.close(reader)
        return super().close(key, session)


def raising_key(key: str) -> bool:
    """Which keys `RaisingWebSessions.update` fails on (about 1 in 8, by a stable hash)."""
    digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % 8 == 3


class RaisingWebSessions(WebSessions):
    """WebSessions whose `update` raises for the keys `raising_key` picks: a buggy processor."""

    def update(self, session: Any, fragment: Mapping[str, Any]) -> Any | None:
        """Fail on purpose for the chosen visitors (the key is not in the fragment: recompute)."""
        if raising_key(f"{fragment.get('ip')}|{fragment.get('agent')}"):
            raise RuntimeError("deliberate failure for this visitor")
        return super().update(session, fragment)
