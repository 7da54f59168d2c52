"""`sessionizer.handover`: every attribute of the engine and its parts survives a handover,
and whatever cannot be handed over safely is refused with a reason (the stream replays)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, replace
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework import StreamProcessor
from framework.kernel.watermark import Watermark
from framework.testing.engine_cases import Recorder, scenarios
from sessionizer import Fragment, Record, SessionEngine
from sessionizer.due_queue import DueQueue
from sessionizer.engine_state import CARRIED, PER_OWNER, REBUILT, EngineState
from sessionizer.handover import (
    HandoverUnavailable,
    export_engine,
    processor_identity,
    restore_engine,
)
from sessionizer.open_sessions import OpenSessions
from sessionizer.segment import Segment
from sessionizer.timeline import KeyTimeline
from state.record import StreamState
from state.tracker import SafeOffsetTracker

STREAM = "app.stream.0001"


def _plain(value: Any) -> Any:
    """Every attribute of the engine's parts, recursively, as comparable values."""
    if isinstance(value, Segment):
        return {slot: _plain(getattr(value, slot)) for slot in Segment.__slots__}
    if isinstance(value, KeyTimeline):
        slots = {slot: getattr(value, slot) for slot in KeyTimeline.__slots__}
        return (slots, [_plain(segment) for segment in value])
    if isinstance(value, SafeOffsetTracker):
        return {name: _plain(item) for name, item in vars(value).items()}
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return (type(value).__name__, [_plain(item) for item in value])
    if isinstance(value, DueQueue):  # stale entries are not carried: they decide nothing
        return value.live()
    if isinstance(value, OpenSessions):  # stale queue entries are not carried either
        return (_plain(value.timelines), value.queued())
    if isinstance(value, bytearray):
        return bytes(value)
    if hasattr(value, "export_state"):  # a part with its own handover test (producer clocks)
        return value.export_state()
    return value


def _run(scenario: Any, upto: int) -> tuple[SessionEngine, StreamState]:
    engine = SessionEngine(STREAM, scenario.processor())
    for record in scenario.records[:upto]:
        engine.process(record)
    position = scenario.records[upto - 1].offset + 1 if upto else 0
    return engine, engine.snapshot(position)


@settings(max_examples=300, deadline=None)
@given(scenarios(), st.data())
def test_every_attribute_of_the_engine_survives_a_handover(scenario: Any, data: Any) -> None:
    upto = data.draw(st.integers(0, len(scenario.records)))
    engine, state = _run(scenario, upto)
    assert set(vars(engine)) == {*CARRIED, *REBUILT, *PER_OWNER}, (
        "an engine attribute is not in sessionizer.engine_state's lists: carry it in "
        "EngineState (CARRIED), or say why not (REBUILT, PER_OWNER)"
    )
    loaded = replace(state, epoch=state.epoch + 1)
    restored = restore_engine(scenario.processor(), loaded, export_engine(engine))
    for name in CARRIED:
        assert _plain(getattr(restored, name)) == _plain(getattr(engine, name)), name
    # CARRIED is `EngineState`'s fields: the value the engine exports carries each one.
    saved, again = engine.export_state(), restored.export_state()
    for field in fields(EngineState):
        assert _plain(getattr(again, field.name)) == _plain(getattr(saved, field.name)), field
    assert restored.counters.open_sessions == engine.counters.open_sessions


def _engine_with_open_sessions(
    processor: StreamProcessor[Any],
) -> tuple[SessionEngine, StreamState]:
    engine = SessionEngine(STREAM, processor)
    for offset, key in enumerate(["a", "b", "a"]):
        engine.process(Fragment(offset, key, 1_000 + offset, {"o": offset, "end": False}))
    engine.process(Watermark(2_000, offset=3))
    return engine, engine.snapshot(4)


class Points:
    """A session object msgpack cannot carry as it is."""

    def __init__(self) -> None:
        self.offsets: set[int] = set()


class SetSessions(StreamProcessor[Points]):
    timeout = 60
    grace = 0  # folded at once: these tests need session objects in the engine

    def open(self, key: str, fragment: Mapping[str, Any]) -> Points:
        return Points()

    def update(self, session: Points, fragment: Mapping[str, Any]) -> None:
        session.offsets.add(fragment["o"])

    def close(self, key: str, session: Points) -> dict[str, Any]:
        return {"offsets": sorted(session.offsets)}


class DumpedSetSessions(SetSessions):
    def dump_session(self, session: Points) -> Any:
        return sorted(session.offsets)

    def load_session(self, data: Any) -> Points:
        points = Points()
        points.offsets = set(data)
        return points


def test_a_session_msgpack_cannot_carry_refuses_the_handover_naming_the_hooks() -> None:
    engine, _ = _engine_with_open_sessions(SetSessions())
    with pytest.raises(HandoverUnavailable, match="dump_session/load_session"):
        export_engine(engine)


def test_dump_and_load_hooks_carry_any_session_object() -> None:
    engine, state = _engine_with_open_sessions(DumpedSetSessions())
    restored = restore_engine(DumpedSetSessions(), state, export_engine(engine))
    end = Watermark(5_000, end=True, offset=4)
    assert restored.process(end) == engine.process(end)


def test_a_tuple_in_a_session_is_refused_by_the_default_dump() -> None:
    class Tuples(Recorder):
        def open(self, key: str, fragment: Mapping[str, Any]) -> dict[str, Any]:
            return {"offsets": [], "seen": {}, "pair": (1, 2)}

    engine, _ = _engine_with_open_sessions(Tuples(60_000, 0, None, frozenset()))
    with pytest.raises(HandoverUnavailable, match="tuple"):
        export_engine(engine)


def _recorder() -> Recorder:
    return Recorder(60_000, 0, None, frozenset())


def test_another_processor_version_or_timing_is_refused() -> None:
    engine, state = _engine_with_open_sessions(_recorder())
    data = export_engine(engine)

    class Versioned(Recorder):
        version = "2"

    assert processor_identity(Versioned(60_000, 0, None, frozenset())).endswith("Versioned@2")
    with pytest.raises(HandoverUnavailable, match="written by processor"):
        restore_engine(Versioned(60_000, 0, None, frozenset()), state, data)
    with pytest.raises(HandoverUnavailable, match="timing"):
        restore_engine(Recorder(30_000, 0, None, frozenset()), state, data)


def test_undecodable_or_inconsistent_data_is_refused() -> None:
    engine, state = _engine_with_open_sessions(_recorder())
    data = export_engine(engine)
    with pytest.raises(HandoverUnavailable, match="undecodable"):
        restore_engine(_recorder(), state, data[: len(data) // 2])
    # A state the engine does not agree with (another commit than the one exported).
    other = replace(state, committed_offset=state.committed_offset + 1)
    with pytest.raises(HandoverUnavailable, match="does not extend the record"):
        restore_engine(_recorder(), other, data)
    document = msgpack.unpackb(data, raw=False, strict_map_key=False)
    document["engine"]["tracker"] = "nonsense"
    with pytest.raises(HandoverUnavailable, match="tracker is not a list"):
        restore_engine(_recorder(), state, msgpack.packb(document, use_bin_type=True))
    document["v"] = 99
    with pytest.raises(HandoverUnavailable, match="format version"):
        restore_engine(_recorder(), state, msgpack.packb(document, use_bin_type=True))


def test_a_parked_record_is_carried() -> None:
    processor = _recorder()
    processor.max_lead = 1.0
    engine = SessionEngine(STREAM, processor)
    records: list[Record] = [
        Fragment(0, "a", 1_000, {"o": 0, "end": False}),
        Fragment(1, "a", 900_000, {"o": 1, "end": False}),  # parked
    ]
    for record in records:
        engine.process(record)
    state = engine.snapshot(2)
    assert state.safe_offset == 0
    restored = restore_engine(processor, state, export_engine(engine))
    confirm = Fragment(2, "a", 900_100, {"o": 2, "end": False})
    assert restored.process(confirm) == engine.process(confirm)
    end = Watermark(999_000, end=True, offset=3)
    assert restored.process(end) == engine.process(end)
