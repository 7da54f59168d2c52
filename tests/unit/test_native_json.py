"""The native session JSON (sessionizer/native) against the reference, `sessionizer.sinks`.

The property: for any value, `session_json` either gives it back (None: the Python
encoder decides, its fallback for sets, dates and decimals and its errors included)
or returns exactly the bytes the reference writes.  And it gives back none of the
real sessions `WebSessions` makes of the apache log: those are its reason to exist.
`SessionJson` writes the same bytes from a `FinishedSession`'s slots as the reference
does from its `to_dict()`, or gives the session back.
tests/unit/test_session_json.py runs on the compiled path too (test_hot_path_compiled.py),
where `encode_session` uses it.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from datetime import UTC, datetime
from decimal import Decimal
from enum import IntEnum
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from framework.testing.hot_path_runs import load_native, printed_on
from router.formats import parse_file
from sessionizer import FinishedSession, Fragment, SessionEngine, Watermark
from sessionizer.examples import WebSessions
from sessionizer.records import FIXED_FIELDS
from sessionizer.sinks import _session_json, native_session_json

DATA = Path(__file__).resolve().parents[1] / "data"
FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def native() -> Any:
    return load_native("_sessionizer_json")


def reference(value: Any) -> bytes | str:
    """The reference's bytes for `value`, or the error it refuses it with."""
    try:
        return _session_json(value).encode()
    except (TypeError, ValueError, RecursionError) as exc:
        return f"{type(exc).__name__}: {exc}"


def agrees(native: Any, value: Any) -> bool:
    """Assert the property; return True if the native encoder encoded `value` itself."""
    fast = native.session_json(value)
    if fast is None:
        return False
    assert type(fast) is bytes
    assert fast == reference(value)
    return True


class Level(IntEnum):
    HIGH = 3


_PLAIN = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_PLAIN_VALUES = st.recursive(
    _PLAIN,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=16,
)
_ANY = (
    _PLAIN
    | st.floats()
    | st.sampled_from(
        [
            "\ud800 a lone surrogate",
            Level.HIGH,
            Decimal("1.10"),
            datetime(2024, 5, 1, tzinfo=UTC),
            frozenset({1, 2}),
            {"b", "a"},
            b"bytes",
            OrderedDict(a=1),
        ]
    )
)
_ANY_VALUES = st.recursive(
    _ANY,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=8) | st.integers() | st.none(), inner, max_size=4)
    ),
    max_leaves=12,
)


@FUZZ
@given(st.dictionaries(st.text(max_size=12), _PLAIN_VALUES, max_size=10))
def test_plain_values_encode_natively_to_the_reference_bytes(native: Any, value: Any) -> None:
    assert agrees(native, value)


@FUZZ
@given(_ANY_VALUES)
def test_any_value_encodes_natively_as_the_reference_or_goes_to_it(native: Any, value: Any) -> None:
    agrees(native, value)


def test_what_the_reference_alone_decides_goes_to_it(native: Any) -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    deep: Any = 1
    for _ in range(100):
        deep = [deep]
    given_back = [
        math.nan,
        math.inf,
        {1: "an integer key"},
        {"a": {"set"}},
        Level.HIGH,
        Decimal("1"),
        OrderedDict(a=1),
        "\udc80",
        cycle,
        deep,
    ]
    for value in given_back:
        assert native.session_json({"v": value}) is None, value
    assert isinstance(reference({"v": deep}), bytes)  # deep, but the reference encodes it


def test_escapes_and_numbers_are_the_reference_bytes(native: Any) -> None:
    value = {
        "text": 'a "quote" \\ \n\r\t\b\f \x00 \x1f \x7f é 東京 🚀 \u2028',
        "numbers": [0, -1, 2**63 - 1, -(2**63), 2**64, -(2**70), 0.1, 1e16, 1e-7, -0.0, 1 / 3],
        "flags": [True, False, None],
        "empty": [{}, [], (), ""],
        "z": 1,
        "A": 2,
        "é": 3,
        "": 4,
    }
    assert agrees(native, value)


def _real_sessions() -> list[FinishedSession]:
    engine = SessionEngine("sessionizer.stream.0000", WebSessions())
    sessions: list[FinishedSession] = []
    parsed = parse_file(DATA / "apache_logs", "apache")
    for offset, fragment in enumerate(parsed):
        record = Fragment(offset, fragment.key, fragment.timestamp_ms, fragment.fields)
        sessions += [out for out in engine.process(record) if isinstance(out, FinishedSession)]
    high = max(fragment.timestamp_ms for fragment in parsed)
    end = engine.process(Watermark(high, end=True, offset=len(parsed)))
    return sessions + [out for out in end if isinstance(out, FinishedSession)]


def test_every_real_session_encodes_natively(native: Any) -> None:
    sessions = _real_sessions()
    assert len(sessions) > 3000
    for session in sessions:
        assert agrees(native, session.to_dict()), session.session_id


def test_the_sink_writes_with_the_native_path_when_it_runs_compiled(native: Any) -> None:
    script = "from sessionizer import sinks; print(sinks._NATIVE_JSON is not None)"
    assert printed_on("compiled", script) == "True"
    assert printed_on("python", script) == "False"


# `SessionJson`: the same bytes straight from a `FinishedSession`'s slots.
FIXED_OR_NOT = st.sampled_from([*FIXED_FIELDS, "truncated", "result"]) | st.text(max_size=8)
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


def _sessions(values: Any) -> Any:
    return st.builds(
        FinishedSession,
        st.text(max_size=12), st.text(max_size=12), st.text(max_size=12),
        INT64, INT64, INT64, INT64, st.integers(0, 2**70),
        st.dictionaries(FIXED_OR_NOT, values, max_size=8), st.booleans(),
    )  # fmt: skip


def session_agrees(native: Any, session: FinishedSession) -> bool:
    """Assert the property of the session's own encoder; True if it encoded the session."""
    fast = native_session_json(native)(session)
    if fast is None:
        return False
    assert type(fast) is bytes
    assert fast == reference(session.to_dict())
    return True


@FUZZ
@given(_sessions(_PLAIN_VALUES))
def test_a_session_of_plain_values_encodes_from_its_slots(
    native: Any, session: FinishedSession
) -> None:
    """Result keys named like the fixed fields (or `truncated`) lose to them, as in `to_dict`."""
    assert session_agrees(native, session)  # hypothesis text has no lone surrogates


@FUZZ
@given(_sessions(_ANY_VALUES))
def test_any_session_encodes_from_its_slots_as_the_reference_or_goes_to_it(
    native: Any, session: FinishedSession
) -> None:
    session_agrees(native, session)


def test_what_the_slots_encoder_gives_back(native: Any) -> None:
    def made(result: Any, key: str = "k") -> FinishedSession:
        return FinishedSession("s:1:ab", key, "s", 1, 2, 3, 4, 5, result)

    for session in (
        made(OrderedDict(a=1)),  # not a plain dict: `to_dict` makes one
        made({1: "an integer key"}),
        made({"\udc80": 1}),
        made({"v": {"set"}}),
        made({}, key="\ud800"),
    ):
        assert native_session_json(native)(session) is None, session
    with pytest.raises(TypeError, match="member descriptor"):
        native.SessionJson(FinishedSession.result, property(), [])


def test_every_real_session_encodes_from_its_slots(native: Any) -> None:
    for session in _real_sessions():
        assert session_agrees(native, session), session.session_id
