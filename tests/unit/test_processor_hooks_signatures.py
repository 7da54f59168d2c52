"""A hook the engine cannot call as documented fails at class definition, naming it: with the
wrong parameters every fragment would have become a dead letter."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from framework.testkit import end, frag, run
from sessionizer.errors import ProcessorError
from sessionizer.processor import StreamProcessor


class Counts(StreamProcessor[dict[str, int]]):
    timeout = 60

    def open(self, key: str, fragment: Any) -> dict[str, int]:
        return {"n": 0}

    def update(self, session: dict[str, int], fragment: Any) -> None:
        session["n"] += 1

    def close(self, key: str, session: dict[str, int]) -> dict[str, int]:
        return session


@pytest.mark.parametrize(
    ("hook", "function", "parameters"),
    [
        ("timestamp", lambda self, fragment: 0, "(fragment, record_timestamp_ms)"),
        ("is_end", lambda self: False, "(fragment)"),
        ("is_end", lambda self, fragment, extra: False, "(fragment)"),
        ("open", lambda self, fragment: {}, "(key, fragment)"),
        ("update", lambda self, session, fragment, more: None, "(session, fragment)"),
        ("close", lambda self, session: {}, "(key, session)"),
        ("dump_session", lambda self: None, "(session)"),
        ("load_session", lambda self, data, version: None, "(data)"),
    ],
)
def test_a_hook_with_parameters_the_engine_cannot_pass_fails_at_class_definition(
    hook: str, function: Callable[..., Any], parameters: str
) -> None:
    with pytest.raises(ProcessorError, match=rf"^Bad\.{hook} must take {re.escape(parameters)}"):
        type("Bad", (Counts,), {hook: function})


@pytest.mark.parametrize(
    "function",
    [
        lambda self, fragment, record_timestamp_ms: record_timestamp_ms,
        lambda self, fragment, stamp=0, *more: stamp,  # other names, defaults, more optional
        lambda self, *args: args[1],
        lambda self, *args, **kwargs: args[1],
    ],
)
def test_any_signature_that_accepts_the_call_is_taken(function: Callable[..., Any]) -> None:
    cls = type("Fine", (Counts,), {"timestamp": function})
    result = run(cls(), [frag("ann", 0), frag("ann", 1_000), end()])
    assert [s.result for s in result.sessions] == [{"n": 2}] and not result.dead_letters
