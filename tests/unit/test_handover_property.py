"""Planned moves with a handover give exactly the uninterrupted run; a bad handover replays.

For random streams (out-of-order fragments within and beyond the grace, END
fragments, watermarks, records dated far ahead, hooks that raise) an owner is
moved at random points: it commits, exports its engine into a handover record
(`state.handover`), and the next owner, a fresh engine, restores it from the
stored bytes and reads on from the committed offset.  The concatenated output
must equal the uninterrupted run's, record for record: zero duplicates, zero
replayed records.  When the record is corrupted, stale or missing, the next
owner replays from the safe offset as after a crash: the output equals the
uninterrupted run's after de-duplication by session id.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from framework.kernel.watermark import JOINED, Watermark
from sessionizer import EngineOutput, Fragment, Record, SessionEngine
from sessionizer.handover import export_engine, restore_engine
from sessionizer.processor import StreamProcessor
from state.handover import (
    HandoverMissing,
    HandoverRecord,
    HandoverStore,
    MemoryHandoverLog,
    MemoryPointers,
)
from state.record import StreamState

STREAM = "app.stream.0003"
_FAR = 10_000


class Recorder(StreamProcessor[dict[str, Any]]):
    """Result: the offsets (field "o") in fold order; `update` raises on `poison` offsets."""

    def __init__(
        self,
        timeout: int,
        grace: int,
        max_ms: int | None,
        poison: frozenset[int],
        skew: int | None = None,
    ):
        self.max_producer_skew = None if skew is None else skew / 1000
        self.timeout = timeout / 1000
        self.grace = grace / 1000
        self.max_session_duration = None if max_ms is None else max_ms / 1000
        self.max_lead = 1.0  # 1000 ms: the generator's jumps are parked
        self.poison = poison

    def is_end(self, fragment: Mapping[str, Any]) -> bool:
        return bool(fragment["end"])

    def open(self, key: str, fragment: Mapping[str, Any]) -> dict[str, Any]:
        return {"offsets": [], "bytes": b"x", "ratio": 0.5, "seen": {}}

    def update(self, session: dict[str, Any], fragment: Mapping[str, Any]) -> None:
        if fragment["o"] in self.poison:
            raise ValueError("poisoned update")
        session["offsets"].append(fragment["o"])
        session["seen"][fragment["o"] % 3] = True

    def close(self, key: str, session: dict[str, Any]) -> dict[str, Any]:
        return {"offsets": list(session["offsets"]), "seen": sorted(session["seen"])}


@dataclass(frozen=True)
class Scenario:
    timeout: int
    grace: int
    max_ms: int | None
    records: tuple[Record, ...]
    poison: frozenset[int]
    skew: int | None = None

    def processor(self) -> Recorder:
        return Recorder(self.timeout, self.grace, self.max_ms, self.poison, self.skew)


# (clock advance, offset step, key, lag, kind: 0 watermark, 1 END, 2 jump far ahead, else fragment)
_STEP = st.tuples(
    st.integers(0, 3), st.integers(1, 2), st.integers(0, 2), st.integers(0, 8), st.integers(0, 12)
)


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    timeout, grace = draw(st.integers(1, 6)), draw(st.integers(0, 4))
    max_ms = draw(st.none() | st.integers(3, 20))
    clock, offset = 1_000, 0
    records: list[Record] = []
    # Two producers (their clocks are engine state too), or the anonymous one.
    producers = ["a", "b"] if draw(st.booleans()) else []
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
    return Scenario(timeout, grace, max_ms, tuple(records), frozenset(poison), skew)


@dataclass
class Move:
    at: int
    """Index of the first record the next owner must see."""
    fault: str
    """"none", "corrupt" (a byte flipped), "stale" (the pointer is an older move's), "missing"."""


def _key(output: EngineOutput) -> str:
    """Everything an output says (a session's id, offsets, times and result; a dead letter's)."""
    return repr(output)


def _run_with_moves(scenario: Scenario, moves: list[Move]) -> tuple[list[EngineOutput], int]:
    """Run owner after owner; return the outputs and the records replayed by all owners."""
    records, offsets = scenario.records, [r.offset for r in scenario.records]
    log, pointers = MemoryHandoverLog(), MemoryPointers()
    store = HandoverStore(log, pointers)
    engine = SessionEngine(STREAM, scenario.processor())
    epoch, index, replayed = 1, 0, 0
    outputs: list[EngineOutput] = []
    for move in moves:
        for record in records[index : move.at]:
            outputs.extend(engine.process(record))
        index = max(index, move.at)
        position = offsets[index - 1] + 1 if index else 0
        committed = engine.snapshot(position)
        loaded = replace(StreamState.decode(committed.encode(), stream=STREAM), epoch=epoch + 1)
        handover = HandoverRecord(STREAM, epoch + 1, position, export_engine(engine))
        if move.fault != "stale":
            store.put(handover)
        if move.fault == "corrupt":
            stream, data = log.records[-1]
            flip = len(data) // 2
            log.records[-1] = (stream, data[:flip] + bytes([data[flip] ^ 0x40]) + data[flip + 1 :])
        if move.fault == "missing":
            log.records[-1] = ("another.stream", b"")
        epoch += 1
        try:
            record = store.fetch(STREAM, epoch, loaded.committed_offset)
        except HandoverMissing as missing:
            assert move.fault != "none", missing
            engine = SessionEngine(STREAM, scenario.processor(), resume=loaded)
            start = next(
                (i for i, o in enumerate(offsets) if o >= loaded.safe_offset), len(records)
            )
            replayed += index - start
            index = start
            continue
        assert move.fault == "none"
        engine = restore_engine(scenario.processor(), loaded, record.engine)
    for record in records[index:]:
        outputs.extend(engine.process(record))
    return outputs, replayed


def _uninterrupted(scenario: Scenario) -> list[EngineOutput]:
    engine = SessionEngine(STREAM, scenario.processor())
    return [output for record in scenario.records for output in engine.process(record)]


def _moves(data: st.DataObject, scenario: Scenario, faults: st.SearchStrategy[str]) -> list[Move]:
    points = data.draw(st.lists(st.integers(0, len(scenario.records)), max_size=4), label="at")
    return [Move(at, data.draw(faults, label="fault")) for at in sorted(points)]


@settings(max_examples=500, deadline=None)
@given(scenarios(), st.data())
def test_planned_moves_with_handover_equal_the_uninterrupted_run(
    scenario: Scenario, data: st.DataObject
) -> None:
    moves = _moves(data, scenario, st.just("none"))
    outputs, replayed = _run_with_moves(scenario, moves)
    assert replayed == 0
    assert [_key(o) for o in outputs] == [_key(o) for o in _uninterrupted(scenario)]


@settings(max_examples=400, deadline=None)
@given(scenarios(), st.data())
def test_a_bad_handover_replays_and_equals_the_run_after_deduplication(
    scenario: Scenario, data: st.DataObject
) -> None:
    faults = st.sampled_from(["none", "corrupt", "stale", "missing"])
    moves = _moves(data, scenario, faults)
    outputs, _ = _run_with_moves(scenario, moves)
    expected = {_key(o) for o in _uninterrupted(scenario)}
    got = [_key(o) for o in outputs]
    assert set(got) == expected
    if all(move.fault == "none" for move in moves):
        assert len(got) == len(expected)
