"""`encode_session` (CPython's C encoder called directly) writes exactly what `json.dumps`
wrote per call, and refuses what it refused with the same error.

The sessions topic is a contract: the bytes of a session must not change with
how it is encoded.  Real sessions come from `WebSessions` over the apache log in
tests/data (read in place); made-up ones cover non-ASCII text, floats,
values JSON cannot hold, a cycle and the session after it, and any result
hypothesis makes of nested maps, lists and values the fallback handles or refuses.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from router.formats import parse_file
from sessionizer import FinishedSession, Fragment, SessionEngine, Watermark
from sessionizer.examples import WebSessions
from sessionizer.sinks import UnsendableSession, encode_session, json_fallback

DATA = Path(__file__).resolve().parents[1] / "data"


def _reference(session: FinishedSession) -> bytes:
    """How the sink encoded a session before: a new encoder per call."""
    text = json.dumps(session.to_dict(), sort_keys=True, default=json_fallback, allow_nan=False)
    return text.encode()


def _session(result: dict[str, Any], *, truncated: bool = False) -> FinishedSession:
    return FinishedSession(
        session_id="s-1",
        key="10.0.0.1|Mozilla/5.0 (X11; Linux) — ünïcødé",
        stream="sessionizer.stream.0000",
        first_offset=3,
        last_offset=9,
        first_ts=1_700_000_000_000,
        last_ts=1_700_000_060_000,
        fragments=4,
        result=result,
        truncated=truncated,
    )


def _real_sessions(limit: int) -> list[FinishedSession]:
    path = DATA / "apache_logs"
    engine = SessionEngine("sessionizer.stream.0000", WebSessions())
    sessions: list[FinishedSession] = []
    high = 0
    parsed = parse_file(path, "apache")[: limit * 4]
    for offset, fragment in enumerate(parsed):
        high = max(high, fragment.timestamp_ms)
        record = Fragment(offset, fragment.key, fragment.timestamp_ms, fragment.fields)
        sessions += [out for out in engine.process(record) if isinstance(out, FinishedSession)]
    end = engine.process(Watermark(high, end=True, offset=len(parsed)))
    sessions += [out for out in end if isinstance(out, FinishedSession)]
    return sessions


def test_real_sessions_encode_to_the_same_bytes() -> None:
    sessions = _real_sessions(2_000)
    assert len(sessions) > 100
    for session in sessions:
        assert encode_session(session) == _reference(session), session.session_id


@pytest.mark.parametrize(
    "result",
    [
        {"title": "Grüße, 東京 🚀", "path": "/a\u2028b", "quote": 'say "hi"\\'},
        {"avg": 0.1, "big": 1e16, "small": 1e-7, "neg_zero": -0.0, "third": 1 / 3, "n": 2**70},
        {"when": datetime(2024, 5, 1, 12, tzinfo=UTC), "amount": Decimal("1.10"), "tags": {"b"}},
        {"nested": {"b": [1, 2.5, None, True], "a": {"z": "ž", "y": ()}}, "fixed_wins": 1},
        {"session_id": "a result field the fixed fields override"},
    ],
)
def test_made_up_sessions_encode_to_the_same_bytes(result: dict[str, Any]) -> None:
    for truncated in (False, True):
        session = _session(result, truncated=truncated)
        assert encode_session(session) == _reference(session)


@pytest.mark.parametrize("bad", [math.nan, math.inf, {1: "a", "b": 2}, b"x", {"a", 1}])
def test_unencodable_sessions_still_raise_and_the_encoder_goes_on(bad: Any) -> None:
    with pytest.raises(UnsendableSession) as raised:
        encode_session(_session({"bad": bad}))
    assert raised.value.reason == "session-unencodable"
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises(UnsendableSession):
        encode_session(_session({"cycle": cyclic}))
    good = _session({"after": "a failure", "x": 1.5})
    assert encode_session(good) == _reference(good)


def test_too_large_is_measured_on_the_same_bytes() -> None:
    session = _session({"text": "é" * 100})
    size = len(_reference(session))
    assert encode_session(session, max_bytes=size) == _reference(session)
    with pytest.raises(UnsendableSession) as raised:
        encode_session(session, max_bytes=size - 1)
    assert raised.value.reason == "session-too-large"


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()  # NaN and infinities included: both ways must refuse them alike
    | st.text()
    | st.decimals(allow_nan=False)
    | st.datetimes()
    | st.frozensets(st.integers(), max_size=4)
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.text(max_size=12), _VALUES, max_size=8))
def test_any_result_encodes_as_json_dumps_did_or_fails_the_same_way(result: Any) -> None:
    session = _session(result)
    try:
        expected: bytes | str = _reference(session)
    except (TypeError, ValueError, RecursionError) as exc:
        expected = f"{type(exc).__name__}: {exc}"
    try:
        got: bytes | str = encode_session(session)
    except UnsendableSession as exc:
        got = exc.error
    assert got == expected


def test_a_cycle_is_refused_as_json_dumps_refuses_it_and_the_next_session_is_clean() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(UnsendableSession, match="Circular reference detected"):
        encode_session(_session({"loop": loop}))
    shared = [1, 2]  # the same object twice is no cycle, even right after one
    good = _session({"a": shared, "b": shared})
    assert encode_session(good) == _reference(good)
