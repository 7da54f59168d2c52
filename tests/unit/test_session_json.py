"""`encode_session` (one encoder made once) writes exactly what `json.dumps` wrote per call.

The sessions topic is a contract: the bytes of a session must not change with
how it is encoded.  Real sessions come from `WebSessions` over the apache log in
tests/data (read in place); made-up ones cover non-ASCII text, floats,
values JSON cannot hold, and an encoder reused after a failure.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

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
