"""Sessions that can never be sent become reference dead letters, the same on every replay."""

from __future__ import annotations

import json
import math

import pytest

from sessionizer.records import FinishedSession, session_id
from sessionizer.sinks import MemorySink, UnsendableSession, encode_session

STREAM = "t.stream.0001"


def session(result: dict) -> FinishedSession:
    """A finished session of key k at offsets 10..14 with `result`."""
    ident = session_id(STREAM, 10, "k")
    return FinishedSession(ident, "k", STREAM, 10, 14, 1_000, 9_000, 3, result)


def test_a_plain_session_is_json_keyed_fields() -> None:
    decoded = json.loads(encode_session(session({"pages": 3})))
    assert decoded["pages"] == 3 and decoded["session_id"] == session({}).session_id


@pytest.mark.parametrize(
    ("result", "reason"),
    [
        ({200: 3, "x": 1}, "session-unencodable"),  # keys of mixed types cannot be sorted
        ({"ratio": math.nan}, "session-unencodable"),
        ({"blob": "x" * 2_000_000}, "session-too-large"),
    ],
)
def test_an_unsendable_session_is_named_by_a_reference_dead_letter(
    result: dict, reason: str
) -> None:
    with pytest.raises(UnsendableSession) as raised:
        encode_session(session(result))
    assert raised.value.reason == reason
    sink = MemorySink()
    sink.emit(session(result))
    assert sink.sessions == []
    (letter,) = sink.dead_letters
    reference = json.loads(letter.value or b"")
    assert (letter.stream, letter.offset, letter.reason) == (STREAM, 10, reason)
    assert letter.key == session(result).session_id.encode()
    assert reference["session_id"] == session(result).session_id
    assert (reference["first_offset"], reference["last_offset"]) == (10, 14)
    assert reference["reason"] == reason and reference["error"]
