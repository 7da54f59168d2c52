"""Check a run's output against the batch definition: nothing lost, nothing extra.

Sessions are compared by what defines them independent of offsets: key, first
and last event time, and fragment count.  Duplicates (the same `session_id`
written more than once, which replays after a crash may do) must carry
identical content.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from framework.kernel.fragment import Fragment
from router.fragment import ParsedFragment
from sessionizer.processor import StreamProcessor, Timing
from sessionizer.reference import batch_sessions

__all__ = ["Verification", "differences", "expected_sessions", "verify_sessions"]

Signature = tuple[str, int, int, int]


@dataclass(frozen=True)
class Verification:
    """The outcome of comparing found sessions with the expected ones."""

    fragments_sent: int
    sessions_found: int
    expected: int
    lost: int
    extra: int
    duplicates: int
    conflicting_duplicates: int

    @property
    def exact(self) -> bool:
        """Nothing lost, nothing extra, and every duplicate identical to its first copy."""
        return self.lost == 0 and self.extra == 0 and self.conflicting_duplicates == 0

    def line(self) -> str:
        """The demo's verification line."""
        return (
            f"verified: fragments sent {self.fragments_sent}, sessions found "
            f"{self.sessions_found}, expected {self.expected}, lost {self.lost}, "
            f"duplicates {self.duplicates}"
        )


def expected_sessions(
    fragments: Iterable[ParsedFragment], processor: StreamProcessor[Any]
) -> Counter[Signature]:
    """The sessions the batch definition gives for these fragments, as signatures."""
    timing = Timing.of(processor)
    engine_fragments = [
        Fragment(i, f.key, processor.timestamp(f.fields, f.timestamp_ms), f.fields)
        for i, f in enumerate(fragments)
    ]
    sessions = batch_sessions(
        engine_fragments,
        timing.timeout_ms,
        processor.is_end,
        max_duration_ms=timing.max_duration_ms,
    )
    return Counter((s.key, s.first_ts, s.last_ts, s.fragments) for s in sessions)


def verify_sessions(
    written: Iterable[dict[str, Any]], expected: Counter[Signature], fragments_sent: int
) -> Verification:
    """Compare every session written (duplicates included) with the expected signatures."""
    first_copy: dict[str, dict[str, Any]] = {}
    duplicates = conflicting = 0
    for session in written:
        earlier = first_copy.setdefault(session["session_id"], session)
        if earlier is not session:
            duplicates += 1
            conflicting += earlier != session
    found = Counter(_signature(s) for s in first_copy.values())
    return Verification(
        fragments_sent=fragments_sent,
        sessions_found=len(first_copy),
        expected=sum(expected.values()),
        lost=sum((expected - found).values()),
        extra=sum((found - expected).values()),
        duplicates=duplicates,
        conflicting_duplicates=conflicting,
    )


def differences(
    written: Iterable[dict[str, Any]], expected: Counter[Signature], limit: int = 10
) -> list[str]:
    """Up to `limit` lost and `limit` extra sessions, one line each (extra ones with their
    `session_id`s), for a failed verification's report."""
    ids: dict[Signature, set[str]] = {}
    for s in written:
        ids.setdefault(_signature(s), set()).add(s["session_id"])
    found = Counter({sig: len(found_ids) for sig, found_ids in ids.items()})
    lost = sorted((expected - found).elements())[:limit]
    extra = sorted((found - expected).elements())[:limit]
    return [f"lost {sig}" for sig in lost] + [f"extra {sig} {sorted(ids[sig])}" for sig in extra]


def _signature(session: dict[str, Any]) -> Signature:
    """A written session's (key, first_ts, last_ts, fragments), as the batch definition's."""
    return (session["key"], session["first_ts"], session["last_ts"], session["fragments"])
