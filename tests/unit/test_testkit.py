"""`framework.testkit`: a user's processor run as a node would, with crashes, without servers."""

from __future__ import annotations

import doctest
import random
import re
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import framework.testkit
from framework.kernel.watermark import Watermark
from framework.testing.docs import readme_page_views
from framework.testkit import (
    EndOfInput,
    Input,
    assert_batch,
    assert_exact,
    end,
    frag,
    run,
    run_with_crashes,
    watermark,
)
from router.fragment import ParsedFragment
from router.hashing import stream_for_key
from sessionizer.processor import StreamProcessor

DOCS = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
MINUTE = 60_000
T = 1_704_103_200_000  # 2024-01-01T10:00:00Z


class Pages(StreamProcessor):
    """Counts pages; ends on "unload"; raises on the path /boom."""

    timeout = 10 * 60
    grace = 60

    def is_end(self, fragment: Mapping[str, Any]) -> bool:
        return fragment.get("event") == "unload"

    def open(self, key: str, fragment: Mapping[str, Any]) -> dict[str, Any]:
        return {"pages": 0, "paths": []}

    def update(self, session: dict[str, Any], fragment: Mapping[str, Any]) -> None:
        if fragment.get("path") == "/boom":
            raise RuntimeError("boom")
        session["pages"] += 1
        session["paths"].append(fragment.get("path", "/"))

    def close(self, key: str, session: dict[str, Any]) -> dict[str, Any]:
        return session


class WallClock(Pages):
    """Not deterministic: stamps each session with the time it was closed."""

    def close(self, key: str, session: dict[str, Any]) -> dict[str, Any]:
        return {**session, "closed_at": time.time_ns()}


class Dice(Pages):
    """Not deterministic: a random number in every session."""

    def close(self, key: str, session: dict[str, Any]) -> dict[str, Any]:
        return {**session, "sample": random.random()}


class Numbered(Pages):
    """Not deterministic under takeover: numbers sessions with a counter kept on the processor."""

    def __init__(self) -> None:
        self.closed = 0

    def close(self, key: str, session: dict[str, Any]) -> dict[str, Any]:
        self.closed += 1
        return {**session, "number": self.closed}


def traffic() -> list[ParsedFragment | Watermark]:
    """Three visitors, an END, a late fragment, a failing session and a watermark."""
    return [
        frag("ann", T, path="/"),
        frag("bob", T + 1 * MINUTE, path="/a"),
        frag("cy", T + 2 * MINUTE, path="/boom"),
        frag("ann", T + 4 * MINUTE, path="/b"),
        frag("bob", T + 4 * MINUTE, event="unload"),
        frag("ann", T + 3 * MINUTE + 30_000, path="/within-grace"),
        frag("bob", T + 5 * MINUTE, path="/again"),
        frag("ann", T, path="/too-late"),
        watermark(T + 20 * MINUTE),
        frag("ann", T + 21 * MINUTE, path="/next"),
        frag("cy", T + 22 * MINUTE, path="/fine"),
    ]


def test_the_module_example_runs() -> None:
    assert doctest.testmod(framework.testkit, raise_on_error=True).attempted > 0


def test_the_examples_in_docs_testing_run() -> None:
    section = DOCS.read_text().split("## With real ZooKeeper and Kafka", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    assert blocks
    namespace: dict[str, Any] = {"PageViews": readme_page_views()}
    for block in blocks:
        exec(compile(block, str(DOCS), "exec"), namespace)


def test_event_times_are_ms_aware_datetimes_or_iso_text() -> None:
    moment = datetime(2024, 1, 1, 10, tzinfo=UTC)
    assert frag("k", "2024-01-01T10:00Z") == frag("k", moment) == ParsedFragment("k", T, {})
    assert frag("k", T, key="field", at=1).fields == {"key": "field", "at": 1}
    assert watermark(T) == Watermark(T) and end() == EndOfInput() and end(T).timestamp_ms == T
    with pytest.raises(ValueError, match="no time zone"):
        frag("k", "2024-01-01T10:00")
    with pytest.raises(TypeError):
        frag("k", 1.5)  # type: ignore[arg-type]


def test_a_run_gives_what_a_node_writes() -> None:
    result = run(Pages(), traffic())
    assert [(s.key, s.result["paths"]) for s in result.sessions] == [
        ("bob", ["/a", "/"]),
        ("ann", ["/", "/within-grace", "/b"]),
        ("bob", ["/again"]),
        ("ann", ["/next"]),
        ("cy", ["/fine"]),
    ]
    assert [(d.offset, d.reason) for d in result.dead_letters] == [(7, "late"), (2, "hook:update")]
    assert (
        result.sessions[0].session_id == "test.stream.0000:1:" + result.sessions[0].session_id[-8:]
    )
    assert [len(sessions) for sessions in result.by_key().values()] == [2, 2, 1]
    assert result.crashes == 0


def test_without_end_of_input_open_sessions_stay_open() -> None:
    inputs = [frag("ann", T), frag("ann", T + MINUTE)]
    assert run(Pages(), inputs, end_of_input=False).sessions == []
    assert [s.fragments for s in run(Pages(), inputs).sessions] == [2]
    explicit: list[Input] = [*inputs, end(T + 5 * MINUTE), frag("ann", T + 6 * MINUTE)]
    assert [s.fragments for s in run(Pages(), explicit).sessions] == [2, 1]


def test_several_streams_route_by_the_hash_contract() -> None:
    keys = [f"visitor-{n}" for n in range(20)]
    result = run(Pages(), [frag(key, T + n) for n, key in enumerate(keys)], streams=4)
    assert {s.stream for s in result.sessions} == {f"test.stream.{n:04d}" for n in range(4)}
    for session in result.sessions:
        assert session.stream == f"test.stream.{stream_for_key(session.key, 4):04d}"


def test_an_unsendable_session_becomes_its_reference_dead_letter() -> None:
    class NotJson(Pages):
        def close(self, key: str, session: dict[str, Any]) -> dict[str, Any]:
            return {"ratio": float("nan")}

    result = run(NotJson(), [frag("ann", T)])
    assert result.sessions == []
    assert [d.reason for d in result.dead_letters] == ["session-unencodable"]


def test_crashes_re_emit_identical_sessions_and_lose_nothing() -> None:
    uninterrupted = run(Pages(), traffic())
    crashed = run_with_crashes(Pages(), traffic(), crash_at=[4, 9], uncommitted=3)
    assert crashed.crashes == 2
    assert len(crashed.sessions) > len(uninterrupted.sessions)  # re-emitted after a crash
    unique = crashed.unique()
    key = lambda s: s.session_id  # noqa: E731
    assert sorted(unique.sessions, key=key) == sorted(uninterrupted.sessions, key=key)
    assert sorted(unique.dead_letters, key=repr) == sorted(uninterrupted.dead_letters, key=repr)


def test_a_crash_right_after_a_commit_emits_no_session_and_no_dead_letter_twice() -> None:
    crashed = run_with_crashes(Pages(), traffic(), crash_at="every")
    assert crashed.crashes == len(traffic()) + 1  # every offset, the end of input included
    assert crashed.sessions == run(Pages(), traffic()).sessions
    letters = [(d.offset, d.reason) for d in crashed.dead_letters]
    # Re-read and re-judged late, but its dead letter went out before the commit: not again.
    assert letters == [(7, "late"), (2, "hook:update")]


@pytest.mark.parametrize("streams", [1, 3])
def test_a_deterministic_processor_passes_the_crash_check(streams: int) -> None:
    result = assert_exact(Pages(), traffic(), streams=streams)
    assert len(result.sessions) == 5
    assert assert_exact(Pages, traffic(), crash_at=[0, 5], uncommitted=[0, 1, 6]) is not None


@pytest.mark.parametrize("processor", [WallClock(), Dice(), Numbered()])
def test_the_crash_check_catches_a_non_deterministic_processor(
    processor: StreamProcessor,
) -> None:
    with pytest.raises(AssertionError, match="hooks must be deterministic") as caught:
        assert_exact(processor, traffic())
    assert f"{type(processor).__name__}: session test.stream.0000:" in str(caught.value)
    assert "in the uninterrupted run," in str(caught.value)


def test_a_processor_with_state_on_itself_fails_only_after_a_takeover() -> None:
    run(Numbered(), traffic())  # one owner: the numbering looks plausible
    with pytest.raises(AssertionError, match=r"after a crash after offset \d+") as caught:
        assert_exact(Numbered(), traffic(), crash_at=[6])
    assert "number is 2 in the uninterrupted run, 1 there" in str(caught.value)


def test_the_batch_definition_agrees_with_the_run() -> None:
    result = assert_batch(Pages(), traffic())
    assert len(result.sessions) == 5
    assert_batch(Pages(), traffic(), streams=3)


def test_the_batch_check_reports_a_session_the_definition_does_not_have() -> None:
    class Flaky(Pages):
        """`is_end` answers differently on every call."""

        calls = 0

        def is_end(self, fragment: Mapping[str, Any]) -> bool:
            self.calls += 1
            return self.calls % 3 == 0

    inputs = [frag("ann" if n % 2 else "bob", T + n * MINUTE) for n in range(8)]
    with pytest.raises(AssertionError, match="batch definition"):
        assert_batch(Flaky(), inputs)


def test_bad_arguments_are_explained() -> None:
    with pytest.raises(ValueError, match="past the last offset"):
        run_with_crashes(Pages(), [frag("ann", T)], crash_at=[5])
    with pytest.raises(ValueError, match="offsets"):
        run_with_crashes(Pages(), [frag("ann", T)], crash_at=[-1])
    with pytest.raises(TypeError, match="input 0 is a dict"):
        run(Pages(), [{"key": "ann"}])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="input 1 cannot be produced"):
        run(Pages(), [frag("ann", T), frag("bob", T, big=1 << 70)])
    with pytest.raises(ValueError, match="streams"):
        run(Pages(), [], streams=0)


def test_a_processor_that_cannot_be_copied_is_given_as_a_factory() -> None:
    class Locked(Pages):
        def __init__(self) -> None:
            self.lock = threading.Lock()

    with pytest.raises(TypeError, match="pass its class or a factory"):
        run(Locked(), [frag("ann", T)])
    assert len(assert_exact(Locked, [frag("ann", T)]).sessions) == 1
