"""`SessionEngine.export_state` / `SessionEngine.restore`: the engine owns what a handover moves.

Without the codec: an engine rebuilt from another's `EngineState` and its commit
continues exactly as one engine that read everything would.
"""

from __future__ import annotations

import dataclasses

import pytest

from framework.kernel.watermark import Watermark
from framework.testkit.engine_runs import OffsetRecorder
from sessionizer import Fragment, Record, SessionEngine
from sessionizer.engine_state import EngineState

STREAM = "app.stream.0005"


def _pages() -> OffsetRecorder:
    """60 s timeout, 5 s grace, a 1-hour lead (a parked record is part of the state too)."""
    return OffsetRecorder(timeout_ms=60_000, grace_ms=5_000, lead_ms=3_600_000)


def _records() -> list[Record]:
    records: list[Record] = []
    for offset in range(40):
        key = "abc"[offset % 3]
        time = 1_000 * offset + (offset % 4) * 700  # out of order within the grace
        records.append(Fragment(offset, key, time, {"o": offset, "end": offset % 11 == 10}))
    records.append(Fragment(40, "a", 9_000_000_000, {"o": 40}))  # parked: far ahead
    records.append(Fragment(41, "b", 45_000, {"o": 41}))  # refutes it
    records.append(Watermark(200_000, end=True, offset=42))
    return records


@pytest.mark.parametrize("at", [0, 1, 7, 20, 41, 42, 43])
def test_a_restored_engine_continues_as_one_that_read_everything(at: int) -> None:
    records = _records()
    whole = SessionEngine(STREAM, _pages())
    expected = [output for record in records for output in whole.process(record)]
    first = SessionEngine(STREAM, _pages())
    outputs = [output for record in records[:at] for output in first.process(record)]
    state = first.snapshot(at)
    saved = first.export_state()
    loaded = dataclasses.replace(state, epoch=state.epoch + 1)
    second = SessionEngine.restore(_pages(), loaded, saved)
    assert second.next_offset == at
    assert second.counters.open_sessions == first.counters.open_sessions
    outputs += [output for record in records[at:] for output in second.process(record)]
    assert repr(outputs) == repr(expected)


def test_the_exported_state_is_a_frozen_value() -> None:
    engine = SessionEngine(STREAM, _pages())
    engine.process(Fragment(0, "a", 1_000, {"o": 0}))
    saved = engine.export_state()
    assert isinstance(saved, EngineState) and saved.stream_time_ms == 1_000
    assert [timeline.key for timeline in saved.timelines] == ["a"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        saved.stream_time_ms = 0  # type: ignore[misc]
