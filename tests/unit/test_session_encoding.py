"""Issue 20, item 7: a `close()` result is encoded deterministically, or not at all.

The sink used `default=str`: a set became `"{'/a', '/b'}"`, in an order that
differs between processes (string hashing is salted per process), so two
emissions of one session could differ, and the documented `session-unencodable`
dead letter never happened. The test kit now runs every result through the same
encoder, so a user's test fails where a node would dead-letter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from framework import StreamProcessor
from framework.testkit import assert_batch, assert_exact, frag, run
from sessionizer.records import FinishedSession
from sessionizer.sinks import UnsendableSession, encode_session

ROOT = Path(__file__).resolve().parents[2]
T = 1_704_103_200_000  # 2024-01-01T10:00:00Z
PATHS = [f"/page/{n}" for n in range(40)]


def _session(result: dict[str, Any]) -> FinishedSession:
    return FinishedSession("s:0:00", "k", "s", 0, 1, T, T, 2, result)


_ENCODE_IN_A_NEW_PROCESS = f"""
import sys
from sessionizer.records import FinishedSession
from sessionizer.sinks import encode_session
paths = {PATHS!r}
session = FinishedSession("s:0:00", "k", "s", 0, 1, {T}, {T}, 2, {{"paths": set(paths)}})
sys.stdout.write(encode_session(session).decode())
"""


def test_a_set_encodes_to_the_same_sorted_list_in_every_process() -> None:
    outputs = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(
            [sys.executable, "-c", _ENCODE_IN_A_NEW_PROCESS],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        outputs.add(done.stdout)
    assert len(outputs) == 1, "a set's JSON differs between processes"
    assert json.loads(outputs.pop())["paths"] == sorted(PATHS)


def test_dates_decimals_tuples_and_frozensets_take_their_documented_form() -> None:
    result = {
        "when": datetime(2024, 5, 1, 12, 30, tzinfo=UTC),
        "day": date(2024, 5, 1),
        "amount": Decimal("1.10"),
        "pair": (1, 2),
        "codes": frozenset({404, 200, 500}),
    }
    decoded = json.loads(encode_session(_session(result)))
    assert decoded["when"] == "2024-05-01T12:30:00+00:00"
    assert decoded["day"] == "2024-05-01"
    assert decoded["amount"] == "1.10"
    assert decoded["pair"] == [1, 2]
    assert decoded["codes"] == [200, 404, 500]


@pytest.mark.parametrize(
    "value", [b"raw bytes", object(), {"a", 1}, {("x", 1)}, {frozenset({1})}, 1 + 2j]
)
def test_anything_else_is_session_unencodable(value: object) -> None:
    with pytest.raises(UnsendableSession) as raised:
        encode_session(_session({"value": value}))
    assert raised.value.reason == "session-unencodable"
    assert "TypeError" in raised.value.error


class Visits(StreamProcessor[dict[str, Any]]):
    """Collects the paths of a visit in a set, and returns it as it is."""

    timeout = 600

    def open(self, key: str, fragment: Mapping[str, Any]) -> dict[str, Any]:
        return {"paths": set()}

    def update(self, session: dict[str, Any], fragment: Mapping[str, Any]) -> None:
        session["paths"].add(fragment["path"])

    def close(self, key: str, session: dict[str, Any]) -> dict[str, Any]:
        return session


class Opaque(Visits):
    """Returns an object JSON has no form for."""

    def close(self, key: str, session: dict[str, Any]) -> dict[str, Any]:
        return {"paths": session["paths"], "visitor": object()}


VISIT = [
    frag("ann", T, path="/b"),
    frag("ann", T + 1000, path="/a"),
    frag("ann", T + 2000, path="/c"),
]


def test_the_kit_shows_a_result_as_the_node_writes_it() -> None:
    [session] = run(Visits(), VISIT).sessions
    assert session.result == {"paths": ["/a", "/b", "/c"]}  # a sorted list, as on the wire
    assert assert_exact(Visits(), VISIT).sessions == [session]


@pytest.mark.parametrize("check", [assert_exact, assert_batch])
def test_the_kit_fails_where_a_node_would_dead_letter(check: Any) -> None:
    letters = run(Opaque(), VISIT).dead_letters
    assert [d.reason for d in letters] == ["session-unencodable"]
    with pytest.raises(AssertionError, match=r"cannot be sent: session-unencodable.*object"):
        check(Opaque(), VISIT)
