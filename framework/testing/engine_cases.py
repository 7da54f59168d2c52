"""Shared cases of the engine's tests: Figure 4.3 of the thesis and random handover scenarios.

`FIGURE_4_3` feeds the tracker's and the engine's tests; `scenarios()` (a hypothesis
strategy) draws the random streams the handover tests move between owners, and a
`Scenario`'s `processor()` is the `Recorder` they run, or for some scenarios the same
sessions declared as aggregates (`declared_recorder`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from framework.kernel.fragment import Fragment
from framework.kernel.watermark import JOINED, Watermark
from sessionizer.declarative import (
    DeclarativeProcessor,
    count,
    distinct,
    field,
    first,
    last,
    max_of,
    min_of,
    sum_of,
)
from sessionizer.processor import StreamProcessor
from sessionizer.records import Record

__all__ = ["FIGURE_4_3", "Recorder", "Scenario", "declared_recorder", "scenarios"]

_FAR = 10_000

# Figure 4.3 of the thesis (section 4.3.1), read in offset order: "+" opens a session,
# "*" is its final fragment.  The figure itself is not in the text; this layout is the
# one its prose fixes: s1 ends at 3, s3 at 7, s2 at 8, and s4 starts at 6.
FIGURE_4_3 = [
    (0, "s1", "+"),
    (1, "s2", "+"),
    (2, "s1", ""),
    (3, "s1", "*"),
    (4, "s3", "+"),
    (5, "s2", ""),
    (6, "s4", "+"),
    (7, "s3", "*"),
    (8, "s2", "*"),
]


class Recorder(StreamProcessor[dict[str, Any]]):
    """Result: the offsets (field "o") in fold order; `update` raises on `poison` offsets."""

    def __init__(
        self,
        timeout: int,
        grace: int,
        max_ms: int | None,
        poison: frozenset[int],
        skew: int | None = None,
    ) -> None:
        self.max_producer_skew = None if skew is None else skew / 1000
        self.timeout = timeout / 1000
        self.grace = grace / 1000
        self.max_session_duration = None if max_ms is None else max_ms / 1000
        self.max_lead = 1.0  # 1000 ms: the generator's jumps are parked
        self.poison = poison

    def is_end(self, fragment: Mapping[str, Any]) -> bool:
        """Field "end" ends the session."""
        return bool(fragment["end"])

    def open(self, key: str, fragment: Mapping[str, Any]) -> dict[str, Any]:
        """A session with a value of each kind the handover document carries."""
        return {"offsets": [], "bytes": b"x", "ratio": 0.5, "seen": {}}

    def update(self, session: dict[str, Any], fragment: Mapping[str, Any]) -> None:
        """Record the offset; raise on a poisoned one (a hook failure, as a user's bug)."""
        if fragment["o"] in self.poison:
            raise ValueError("poisoned update")  # a user's bug, as a user's code raises it
        session["offsets"].append(fragment["o"])
        session["seen"][fragment["o"] % 3] = True

    def close(self, key: str, session: dict[str, Any]) -> dict[str, Any]:
        """The offsets in fold order."""
        return {"offsets": list(session["offsets"]), "seen": sorted(session["seen"])}


@dataclass(frozen=True)
class Scenario:
    """A random stream and the processor settings it runs with (times in ms)."""

    timeout: int
    grace: int
    max_ms: int | None
    records: tuple[Record, ...]
    poison: frozenset[int]
    skew: int | None = None
    declared: bool = False
    """Run `declared_recorder` rather than `Recorder`."""

    def processor(self) -> StreamProcessor[Any]:
        """A fresh processor for this scenario."""
        if self.declared:
            return declared_recorder(self.timeout, self.grace, self.max_ms, self.poison, self.skew)
        return Recorder(self.timeout, self.grace, self.max_ms, self.poison, self.skew)


def declared_recorder(
    timeout: int, grace: int, max_ms: int | None, poison: frozenset[int], skew: int | None
) -> DeclarativeProcessor:
    """`Recorder`'s settings and session boundaries, its sessions as aggregates over field "o";
    folding a poisoned offset fails (a missing field), as `Recorder.update` raises."""
    poisoned = field("o").is_in(poison)
    attributes = {
        "aggregates": {
            "count": count(),
            "sum": sum_of("o"),
            "least": min_of("o"),
            "most": max_of("o"),
            "first": first("o"),
            "last": last("o"),
            "ends": count(where=field("end") == True),  # noqa: E712  # builds a condition
            "distinct": distinct("end"),
            "poison": sum_of("no such field", where=poisoned),  # fails on poisoned offsets
        },
        "is_end": lambda self, fragment: bool(fragment["end"]),
        "timeout": timeout / 1000,
        "grace": grace / 1000,
        "max_session_duration": None if max_ms is None else max_ms / 1000,
        "max_lead": 1.0,
        "max_producer_skew": None if skew is None else skew / 1000,
    }
    cls: type[DeclarativeProcessor] = type("DeclaredRecorder", (DeclarativeProcessor,), attributes)
    return cls()


# (clock advance, offset step, key, lag, kind: 0 watermark, 1 END, 2 jump far ahead, else fragment)
_STEP = st.tuples(
    st.integers(0, 3), st.integers(1, 2), st.integers(0, 2), st.integers(0, 8), st.integers(0, 12)
)


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    """Out-of-order fragments, END fragments, watermarks, far-ahead records, poisoned offsets."""
    timeout, grace = draw(st.integers(1, 6)), draw(st.integers(0, 4))
    max_ms = draw(st.none() | st.integers(3, 20))
    clock, offset = 1_000, 0
    records: list[Record] = []
    # Two producers (their clocks are engine state too), or the anonymous one.
    producers: list[str | None] = ["a", "b"] if draw(st.booleans()) else []
    skew = draw(st.none() | st.integers(0, 5)) if producers else None
    for producer in producers:
        records.append(Watermark(0, offset=offset, producer=producer, marker=JOINED))
        offset += 1
    length = draw(st.integers(1, 60))
    for advance, step, key, lag, kind in draw(st.lists(_STEP, min_size=length, max_size=length)):
        clock += advance
        ts = clock - lag
        if kind == 0:
            producer = producers[key % 2] if producers else None
            records.append(Watermark(ts, offset=offset, producer=producer))
        elif kind == 2:  # parked; the next record confirms or refutes it
            records.append(Fragment(offset, f"k{key}", clock + _FAR, {"o": offset, "end": False}))
        else:
            records.append(Fragment(offset, f"k{key}", ts, {"o": offset, "end": kind == 1}))
        offset += step
    if draw(st.booleans()):
        for producer in producers or [None]:
            records.append(Watermark(clock, end=True, offset=offset, producer=producer))
            offset += 1
    fragments = [r.offset for r in records if isinstance(r, Fragment)]
    poison = draw(st.sets(st.sampled_from(fragments), max_size=2)) if fragments else set()
    declared = draw(st.booleans())
    return Scenario(timeout, grace, max_ms, tuple(records), frozenset(poison), skew, declared)
