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

from dataclasses import dataclass, replace

from hypothesis import given, settings
from hypothesis import strategies as st

from framework.testing.engine_cases import Scenario, scenarios
from sessionizer import EngineOutput, SessionEngine
from sessionizer.handover import export_engine, restore_engine
from state.handover import (
    HandoverMissing,
    HandoverRecord,
    HandoverStore,
    MemoryHandoverLog,
    MemoryPointers,
)
from state.record import StreamState

STREAM = "app.stream.0003"


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
