"""The engine's side of a live resize: one key's open sessions out of one engine and into
another (`SessionEngine.take_sessions` / `restore_sessions`, `sessionizer.migration`)."""

from __future__ import annotations

import pytest

from framework.kernel.fragment import Fragment
from framework.testkit.engine_runs import OffsetRecorder, fragment_at
from sessionizer.engine import SessionEngine
from sessionizer.migration import (
    HELD,
    PLACE,
    Admission,
    Origin,
    Unmovable,
    export_session,
    restore_session,
    session_codec,
)
from sessionizer.records import FinishedSession
from sessionizer.segment import Segment

OLD, NEW = "app.stream.0001", "app.stream.0004"


class Gate:
    """Holds back one key; names the sessions of migrated parts by their source offsets."""

    def __init__(self, held_key: str, origins: dict[int, int]) -> None:
        self.held_key, self.origins = held_key, origins
        self.held: list[tuple[Fragment, int, int | None]] = []

    def admit(self, fragment: Fragment, event_time: int, before: int | None) -> Admission:
        if fragment.key == self.held_key:
            self.held.append((fragment, event_time, before))
            return HELD
        return PLACE

    def identify(self, key: str, segment: Segment) -> Origin | None:
        found = [self.origins[o] for o in segment.folded_offsets() if o in self.origins]
        return (OLD, min(found), max(found)) if found else None

    def keeps(self, key: str) -> bool:
        return False


def _sessions(outputs: list[object]) -> list[FinishedSession]:
    return [out for out in outputs if isinstance(out, FinishedSession)]


def test_a_session_moved_mid_way_ends_as_the_one_session_of_one_engine() -> None:
    """Fragments 0..5 on the old stream (some folded, some raw), the rest held on the new."""
    processor = OffsetRecorder(timeout_ms=1_000, grace_ms=300)
    times = [0, 100, 200, 600, 900, 1_000]
    old = SessionEngine(OLD, processor)
    for offset, at in enumerate(times):
        old.process(fragment_at(offset, "k", at))
    (segment,) = old.take_sessions("k")
    assert segment.folded and segment.raw  # both parts travel
    assert old.open_keys() == [] and old.snapshot(len(times)).safe_offset == len(times)
    dump, load = session_codec(processor)
    head, raw = export_session(segment, dump)
    new = SessionEngine(NEW, OffsetRecorder(timeout_ms=1_000, grace_ms=300))
    origins = {10: 0}
    gate = Gate("k", origins)
    new.attach(gate)
    new.process(fragment_at(0, "k", 1_050))  # a producer switched early: held back
    for offset in range(1, 10):
        new.skip(offset)
    members = []
    for index, ((event_time, source, is_end, fields), stamp) in enumerate(raw, start=11):
        origins[index] = source
        members.append(((event_time, source, is_end, fields), stamp, index, None))
    new.restore_sessions("k", [restore_session("k", head, (10, None), members, load)])
    new.place_held("k", gate.held)
    new.skip(20)
    outputs = new.process(fragment_at(21, "k", 5_000))
    (session,) = _sessions(outputs)
    assert session.result["offsets"] == (0, 1, 2, 3, 4, 5, 0)  # the held one is offset 0 there
    assert (session.stream, session.first_offset, session.last_offset) == (OLD, 0, 5)
    assert session.first_ts == 0 and session.last_ts == 1_050 and session.fragments == 7


def test_a_session_object_that_cannot_be_dumped_cannot_move() -> None:
    processor = OffsetRecorder(timeout_ms=1_000)
    engine = SessionEngine(OLD, processor)
    for offset, at in enumerate([0, 10, 20]):
        engine.process(fragment_at(offset, "k", at))
    (segment,) = engine.take_sessions("k")
    segment.state = {"offsets": {1, 2}}  # a set: not plain msgpack
    dump, _load = session_codec(processor)
    with pytest.raises(Unmovable):
        export_session(segment, dump)
