"""`restore_engine` is total and accepts only a document that extends the state record.

A handover record's checksum proves its bytes are the ones written, not that the
writer was right.  For any bytes, and for any valid document with one field
changed (as a buggy or foreign writer would store it, checksum and all),
`restore_engine` returns an engine or raises `HandoverUnavailable`: never
`OverflowError`, `MemoryError` or anything else.  And a document it accepts
gives exactly the output the unchanged one gives: what it cannot check against
the state record it must not need to.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework.kernel.watermark import JOINED, Watermark
from framework.testing.engine_cases import Recorder, Scenario, scenarios
from sessionizer import Fragment, SessionEngine
from sessionizer.handover import HandoverUnavailable, export_engine, restore_engine
from state.record import StreamState

STREAM = "app.stream.0003"

Path = tuple[Any, ...]

# Fields that are the records' own data (event times, END flags, Kafka timestamps, decoded
# fields, the stream time before each, the user's session object, a hook's error text, the
# offsets of the producers' markers): the state record holds nothing to check them against
# (only their ranges and order), the checksum protects them.  Everything else is mutated.
_RECORD_DATA = re.compile(
    r"""^\('timelines',\ \d+,\ 3,\ \d+,\ (
        0,\ \d+,\ [0-5]          # a raw member: event time, is_end, stream time, ..., fields
      | 2,\ 0 | 3,\ [02]          # first_ts; the last folded fragment's event time, is_end
      | 5                        # the user's session object
      | 6,\ [01]                 # a failure's hook and error text
      | 6,\ 2,\ [23]             # the failed fragment's timestamp and fields
    )[,)]
    | ^\('parked',\ (0,\ [0-2]|1)[,)]  # the parked record's key, time, fields, event time
    | ^\('clocks',\ 'history',\ \d+,\ 0\)$  # the offset of a producer's marker""",
    re.VERBOSE,
)


def _leaves(value: Any, path: Path = ()) -> Iterator[Path]:
    """Every path into the document's engine map: leaves and lists (which can lose an item)."""
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, (*path, index))


def _mutable(path: Path) -> bool:
    return bool(path) and _RECORD_DATA.match(repr(path)) is None


def _get(value: Any, path: Path) -> Any:
    for step in path:
        value = value[step]
    return value


def _set(root: Any, path: Path, new: Any) -> None:
    _get(root, path[:-1])[path[-1]] = new


_REPLACEMENTS = st.one_of(
    st.sampled_from(
        [
            None,
            True,
            False,
            0,
            -1,
            1,
            2**63 - 1,
            2**64 - 1,
            -(2**63),
            float("inf"),
            float("-inf"),
            float("nan"),
            1.5,
            1.0,
            4.0,
            "",
            "k9",
            b"",
            b"\xff" * 12,
            [],
            {},
        ]
    ),
    st.integers(-(2**63), 2**64 - 1),
    st.binary(max_size=12),
)


_RAW = re.compile(r"^\('engine', 'timelines', \d+, 3, \d+, 0\)$")


def _mutate(value: Any, path: Path, draw: st.DrawFn) -> str:
    """Shorten or grow the list at `path` (or leave it to the caller: ""); return what was done.

    A session's raw members may grow (a repeated offset is detectable) but not shrink:
    which fragments a session holds is the log's to say, not the state record's.
    """
    if isinstance(value, list) and value and draw(st.booleans()):
        if _RAW.match(repr(path)):
            value.append(value[-1])
            return "a raw member repeated"
        index = draw(st.integers(0, len(value) - 1))
        if draw(st.booleans()):
            del value[index]
            return f"dropped item {index}"
        value.insert(index, value[index])
        return f"repeated item {index}"
    return ""


def _outputs(engine: SessionEngine, scenario: Scenario, start: int, committed: int) -> list[str]:
    """What the engine emits for the records from index `start` on, and its state after."""
    outputs = []
    for record in scenario.records[start:]:
        outputs.extend(engine.process(record))
    rest = scenario.records[start:]
    snapshot = engine.snapshot(rest[-1].offset + 1 if rest else committed)
    # A hook's traceback names this test's frames, not the output: leave it out.
    texts = [re.sub(r"traceback='.*?'\)", ")", repr(output)) for output in outputs]
    return [*texts, repr(replace(snapshot, epoch=0))]


def _exported(scenario: Scenario, upto: int) -> tuple[StreamState, bytes]:
    engine = SessionEngine(STREAM, scenario.processor())
    for record in scenario.records[:upto]:
        engine.process(record)
    position = scenario.records[upto - 1].offset + 1 if upto else 0
    state = engine.snapshot(position)
    return replace(state, epoch=state.epoch + 1), export_engine(engine)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.data())
def test_a_mutated_document_is_refused_or_changes_nothing(scenario: Scenario, data: Any) -> None:
    upto = data.draw(st.integers(0, len(scenario.records)))
    state, packed = _exported(scenario, upto)
    document = msgpack.unpackb(packed, raw=False, strict_map_key=False)
    paths = [("engine", *p) for p in _leaves(document["engine"]) if _mutable(p)]
    path = data.draw(st.sampled_from(paths))
    target = _get(document, path)
    done = _mutate(target, path, data.draw)
    if not done:
        new = data.draw(_REPLACEMENTS)
        if isinstance(target, int) and not isinstance(target, bool) and data.draw(st.booleans()):
            new = target + data.draw(st.sampled_from([-1, 1]))
        _set(document, path, new)
        done = f"set to {new!r}"
    mutated = msgpack.packb(document, use_bin_type=True)
    try:
        engine = restore_engine(scenario.processor(), state, mutated)
    except HandoverUnavailable:
        return  # refused: the next owner replays
    original = restore_engine(scenario.processor(), state, packed)
    committed = state.committed_offset
    assert _outputs(engine, scenario, upto, committed) == _outputs(
        original, scenario, upto, committed
    ), f"accepted a document whose {path} was {done}, and its output differs"


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_are_an_engine_or_refused(data: bytes) -> None:
    state = StreamState(STREAM, epoch=2, safe_offset=3, committed_offset=9, open_sessions=1)
    with contextlib.suppress(HandoverUnavailable):  # refused is fine; anything else fails
        restore_engine(Recorder(3, 1, None, frozenset()), state, data)


def _with_open_sessions() -> tuple[Scenario, StreamState, dict[str, Any]]:
    """Two producers, two keys of two fragments each, open and folded; the exported document."""
    records = [
        Watermark(0, offset=0, producer="a", marker=JOINED),
        Watermark(0, offset=1, producer="b", marker=JOINED),
        Watermark(1_000, offset=2, producer="a"),
        Watermark(1_000, offset=3, producer="b"),
        Fragment(4, "k1", 1_001, {"o": 4, "end": False}),
        Fragment(5, "k2", 1_002, {"o": 5, "end": False}),
        Fragment(6, "k1", 1_003, {"o": 6, "end": False}),
        Fragment(7, "k2", 1_004, {"o": 7, "end": False}),
        Watermark(1_010, offset=8, producer="a"),
        Watermark(1_010, offset=9, producer="b"),
        Watermark(9_000, end=True, offset=10, producer="a"),
        Watermark(9_000, end=True, offset=11, producer="b"),
    ]
    scenario = Scenario(5_000, 0, None, tuple(records), frozenset(), skew=100)
    state, packed = _exported(scenario, 10)
    return scenario, state, msgpack.unpackb(packed, raw=False, strict_map_key=False)


def _restore(scenario: Scenario, state: StreamState, document: dict[str, Any]) -> SessionEngine:
    return restore_engine(scenario.processor(), state, msgpack.packb(document, use_bin_type=True))


def test_the_unchanged_document_is_taken_and_folds_two_fragments_per_session() -> None:
    scenario, state, document = _with_open_sessions()
    outputs = _outputs(_restore(scenario, state, document), scenario, 10, state.committed_offset)
    assert sum("fragments=2" in text for text in outputs) == 2


def test_a_producer_clock_of_infinity_is_refused_not_an_overflow() -> None:
    scenario, state, document = _with_open_sessions()
    document["engine"]["clocks"]["live"][0][1] = float("inf")
    with pytest.raises(HandoverUnavailable, match="clock"):
        _restore(scenario, state, document)


def test_folded_offsets_of_a_huge_int_are_refused_not_a_memory_error() -> None:
    scenario, state, document = _with_open_sessions()
    document["engine"]["timelines"][0][3][0][4] = 2**62
    with pytest.raises(HandoverUnavailable, match="folded offsets are not bytes"):
        _restore(scenario, state, document)


def test_a_session_with_its_folded_count_changed_is_refused() -> None:
    scenario, state, document = _with_open_sessions()
    assert document["engine"]["timelines"][0][3][0][2][3] == 2  # both fragments folded
    document["engine"]["timelines"][0][3][0][2][3] = 0
    with pytest.raises(HandoverUnavailable, match="folded count"):
        _restore(scenario, state, document)


def test_a_session_the_tracker_does_not_know_is_refused() -> None:
    scenario, state, document = _with_open_sessions()
    timelines = document["engine"]["timelines"]
    timelines[0][0], timelines[1][0] = timelines[1][0], timelines[0][0]  # keys swapped
    with pytest.raises(HandoverUnavailable, match="tracker's open sessions"):
        _restore(scenario, state, document)


def test_an_offset_outside_safe_and_committed_is_refused() -> None:
    scenario, state, document = _with_open_sessions()
    document["engine"]["tracker"][1][0][0] = state.committed_offset + 5
    with pytest.raises(HandoverUnavailable, match=r"offset in \[safe, committed\)"):
        _restore(scenario, state, document)


def test_owners_whose_processors_differ_only_in_max_producer_skew_do_not_hand_over() -> None:
    scenario, state, document = _with_open_sessions()  # max_producer_skew: 0.1 s
    other = replace(scenario, skew=5_000)
    with pytest.raises(HandoverUnavailable, match="timing"):
        _restore(other, state, document)
    _restore(scenario, state, document)  # the same settings: taken


def test_owners_with_other_ignore_list_budgets_do_not_hand_over() -> None:
    scenario, state, document = _with_open_sessions()
    data = msgpack.packb(document, use_bin_type=True)
    with pytest.raises(HandoverUnavailable, match="budget"):
        restore_engine(scenario.processor(), state, data, ignore_budget_bytes=1000)
