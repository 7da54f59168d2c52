"""`SessionEngine.export_state` / `SessionEngine.restore`: the engine owns what a handover moves.

Without the codec: an engine rebuilt from another's `EngineState` and its commit
continues exactly as one engine that read everything would.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest

from framework.kernel.watermark import Watermark
from sessionizer import Fragment, Record, SessionEngine, StreamProcessor
from sessionizer.engine_state import EngineState

STREAM = "app.stream.0005"


class Pages(StreamProcessor[dict[str, Any]]):
    timeout = 60
    grace = 5
    max_lead = 3_600.0  # a parked record is part of the state too

    def is_end(self, fragment: Mapping[str, Any]) -> bool:
        return bool(fragment.get("end"))

    def open(self, key: str, fragment: Mapping[str, Any]) -> dict[str, Any]:
        return {"offsets": []}

    def update(self, session: dict[str, Any], fragment: Mapping[str, Any]) -> None:
        session["offsets"].append(fragment["o"])

    def close(self, key: str, session: dict[str, Any]) -> dict[str, Any]:
        return {"offsets": session["offsets"]}


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
    whole = SessionEngine(STREAM, Pages())
    expected = [output for record in records for output in whole.process(record)]
    first = SessionEngine(STREAM, Pages())
    outputs = [output for record in records[:at] for output in first.process(record)]
    state = first.snapshot(at)
    saved = first.export_state()
    loaded = dataclasses.replace(state, epoch=state.epoch + 1)
    second = SessionEngine.restore(Pages(), loaded, saved)
    assert second.next_offset == at
    assert second.counters.open_sessions == first.counters.open_sessions
    outputs += [output for record in records[at:] for output in second.process(record)]
    assert repr(outputs) == repr(expected)


def test_the_exported_state_is_a_frozen_value() -> None:
    engine = SessionEngine(STREAM, Pages())
    engine.process(Fragment(0, "a", 1_000, {"o": 0}))
    saved = engine.export_state()
    assert isinstance(saved, EngineState) and saved.stream_time_ms == 1_000
    assert [timeline.key for timeline in saved.timelines] == ["a"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        saved.stream_time_ms = 0  # type: ignore[misc]
