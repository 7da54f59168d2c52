"""The batch definition of sessions, which the streaming engine must reproduce.

Per key, sort the fragments by event time (ties by offset, i.e. read order) and
split where two neighbours are more than `timeout_ms` apart, after an END
fragment, and (if `max_duration_ms` is given) before a fragment that is
`max_duration_ms` or more after its session's first fragment.  Tests and the
demo's verification compare the engine against this; it deliberately shares no
code with the engine.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from framework.kernel.fragment import Fragment
from sessionizer.records import session_id

__all__ = ["BatchSession", "batch_sessions"]


@dataclass(frozen=True, slots=True)
class BatchSession:
    """A session of the batch definition: its key and its fragments' offsets in event-time order."""

    key: str
    offsets: tuple[int, ...]
    first_ts: int
    last_ts: int

    @property
    def first_offset(self) -> int:
        """Smallest offset of the session's fragments."""
        return min(self.offsets)

    @property
    def last_offset(self) -> int:
        """Largest offset of the session's fragments."""
        return max(self.offsets)

    @property
    def fragments(self) -> int:
        """Number of fragments."""
        return len(self.offsets)

    def session_id(self, stream: str) -> str:
        """Return the id the engine gives this session on `stream`."""
        return session_id(stream, self.first_offset, self.key)


def batch_sessions(
    fragments: Iterable[Fragment],
    timeout_ms: int,
    is_end: Callable[[Mapping[str, Any]], bool],
    *,
    max_duration_ms: int | None = None,
) -> list[BatchSession]:
    """Return the sessions of `fragments` (event time = `timestamp_ms`), by first offset."""
    by_key: dict[str, list[Fragment]] = defaultdict(list)
    for fragment in fragments:
        by_key[fragment.key].append(fragment)
    sessions: list[BatchSession] = []
    for key, group in by_key.items():
        group.sort(key=lambda f: (f.timestamp_ms, f.offset))
        current: list[Fragment] = []
        for fragment in group:
            if current and _splits(current, fragment, timeout_ms, is_end, max_duration_ms):
                sessions.append(_session(key, current))
                current = []
            current.append(fragment)
        sessions.append(_session(key, current))
    return sorted(sessions, key=lambda s: s.first_offset)


def _splits(
    current: list[Fragment],
    fragment: Fragment,
    timeout_ms: int,
    is_end: Callable[[Mapping[str, Any]], bool],
    max_duration_ms: int | None,
) -> bool:
    previous = current[-1]
    if is_end(previous.value) or fragment.timestamp_ms - previous.timestamp_ms > timeout_ms:
        return True
    return (
        max_duration_ms is not None
        and fragment.timestamp_ms - current[0].timestamp_ms >= max_duration_ms
    )


def _session(key: str, members: list[Fragment]) -> BatchSession:
    return BatchSession(
        key=key,
        offsets=tuple(f.offset for f in members),
        first_ts=members[0].timestamp_ms,
        last_ts=members[-1].timestamp_ms,
    )
