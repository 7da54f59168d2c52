"""The engine's shortcuts on its hot path decide exactly as the code they skip.

- A processor that keeps `StreamProcessor`'s `timestamp` and `is_end` gets the same
  outputs as one that spells the defaults out, which the engine must call: the engine
  does not call a default hook, and must not skip one that is overridden, on the class
  or on the instance.
- `close` may return any `Mapping`, not only a dict (a dict is checked first).
- `finished_session` and `ignore_entry` build the records their classes build.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework import StreamProcessor
from framework.kernel.errors import WrongType
from framework.kernel.frozen import slot_writers
from framework.kernel.limits import MAX_EVENT_TIME_MS
from sessionizer import FinishedSession, Fragment, HookFailure, SessionEngine, Watermark
from sessionizer.hooks import keeps_default
from sessionizer.records import finished_session
from state.record import IgnoreEntry, ignore_entry

STREAM = "app.stream.0000"


class Defaults(StreamProcessor[list[int]]):
    """Keeps the default `timestamp` and `is_end`."""

    timeout = 10
    grace = 3

    def open(self, key: str, fragment: Mapping[str, Any]) -> list[int]:
        return []

    def update(self, session: list[int], fragment: Mapping[str, Any]) -> None:
        session.append(fragment["o"])

    def close(self, key: str, session: list[int]) -> dict[str, Any]:
        return {"offsets": session}


class Spelled(Defaults):
    """The defaults written out: the engine has to call these."""

    def timestamp(self, fragment: Mapping[str, Any], record_timestamp_ms: int) -> int:
        return record_timestamp_ms

    def is_end(self, fragment: Mapping[str, Any]) -> bool:
        return False


def end_at(offset: int) -> Watermark:
    return Watermark(50, end=True, offset=offset)


def _outputs(processor: Any, records: list[Any]) -> list[Any]:
    engine = SessionEngine(STREAM, processor)
    outputs = [output for record in records for output in engine.process(record)]
    return [*outputs, engine.counters, engine.snapshot(engine.next_offset)]


def _comparable(output: Any) -> Any:
    if isinstance(output, HookFailure):  # its traceback names the frames it passed
        return ("hook", output.fragment, output.hook, output.error)
    return output


# Event times around the stream's grace and timeout, and some a hook cannot return.
_TIMES = st.one_of(st.integers(0, 40), st.sampled_from([-1, MAX_EVENT_TIME_MS + 1]))


@st.composite
def _records(draw: st.DrawFn) -> list[Any]:
    items = draw(st.lists(st.tuples(st.sampled_from("abc"), _TIMES, st.booleans()), max_size=40))
    records: list[Any] = []
    for offset, (key, time, watermark) in enumerate(items):
        if watermark and time >= 0:
            records.append(Watermark(time, offset=offset))
        else:
            records.append(Fragment(offset, key, time, {"o": offset}))
    records.append(Watermark(50, end=True, offset=len(items)))
    return records


@settings(max_examples=300, deadline=None)
@given(_records())
def test_skipping_the_default_hooks_changes_no_output(records: list[Any]) -> None:
    kept = [_comparable(o) for o in _outputs(Defaults(), records)]
    spelled = [_comparable(o) for o in _outputs(Spelled(), records)]
    assert kept == spelled


def test_out_of_range_record_time_is_a_timestamp_failure_with_the_default_hook() -> None:
    records = [Fragment(0, "a", MAX_EVENT_TIME_MS + 1, {"o": 0})]
    [failure, *_] = _outputs(Defaults(), records)
    assert isinstance(failure, HookFailure) and failure.hook == "timestamp"
    assert "outside the valid event times" in failure.error


class Ends(Defaults):
    def is_end(self, fragment: Mapping[str, Any]) -> bool:
        return True


def test_an_overridden_hook_is_called() -> None:
    records = [Fragment(0, "a", 1, {"o": 0}), Fragment(1, "a", 2, {"o": 1}), end_at(2)]
    sessions = [o for o in _outputs(Ends(), records) if isinstance(o, FinishedSession)]
    assert [s.result["offsets"] for s in sessions] == [[0], [1]]  # each fragment ends one


def test_a_hook_set_on_the_instance_is_called() -> None:
    processor = Defaults()
    processor.timestamp = lambda fragment, record_ts: 1000 + record_ts  # type: ignore[method-assign]
    assert not keeps_default(processor, "timestamp") and keeps_default(processor, "is_end")
    [session] = [
        o
        for o in _outputs(processor, [Fragment(0, "a", 1, {"o": 0}), end_at(1)])
        if isinstance(o, FinishedSession)
    ]
    assert session.first_ts == 1001


def test_a_processor_without_the_hook_is_not_taken_to_keep_the_default() -> None:
    class Duck:  # not a StreamProcessor: calling its missing hook fails, as it always did
        pass

    assert not keeps_default(Duck(), "timestamp")  # type: ignore[arg-type]


def test_close_may_return_any_mapping() -> None:
    class ProxyClose(Defaults):
        def close(self, key: str, session: list[int]) -> Any:
            return MappingProxyType({"offsets": session})

    [session] = [
        o
        for o in _outputs(ProxyClose(), [Fragment(0, "a", 1, {"o": 0}), end_at(1)])
        if isinstance(o, FinishedSession)
    ]
    assert session.result == {"offsets": [0]} and type(session.result) is dict


def test_the_factories_build_what_the_classes_build() -> None:
    values = ("id", "k", STREAM, 3, 9, 10, 20, 4, {"pages": 2}, True)
    built = finished_session(*values)
    assert built == FinishedSession(*values) and type(built) is FinishedSession
    assert hash(ignore_entry("k", 1, 2, 3, 4)) == hash(IgnoreEntry("k", 1, 2, 3, 4))
    assert ignore_entry("k", 1, 2, 3, 4) == IgnoreEntry("k", 1, 2, 3, 4)
    # Each factory sets every field: none is left unset (an AttributeError on read).
    for record in (built, ignore_entry("k", 1, 2, 3, 4)):
        assert all(getattr(record, item.name) is not None for item in fields(record))


def test_slot_writers_refuse_a_class_without_slots() -> None:
    @dataclass(frozen=True)
    class Plain:
        x: int

    with pytest.raises(WrongType, match="Plain is not a slotted dataclass"):
        slot_writers(Plain)
