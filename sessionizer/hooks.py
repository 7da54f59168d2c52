"""Calling a processor's hooks safely: the fold, and the validation of what hooks return.

Every failure of user code becomes a value the engine turns into a dead letter;
nothing a hook returns or raises can stop a stream or make its state unencodable.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

from framework.limits import MAX_EVENT_TIME_MS, MIN_EVENT_TIME_MS
from sessionizer.processor import StreamProcessor
from sessionizer.timeline import Member

__all__ = ["HookFailed", "describe", "event_time", "fold", "valid_time"]


class HookFailed(Exception):
    """A fold hook raised or returned something unusable; names the hook."""

    def __init__(self, hook: str, error: str) -> None:
        super().__init__(f"{hook}: {error}")
        self.hook = hook
        self.error = error


def fold(processor: StreamProcessor, key: str, members: list[Member]) -> dict[str, Any]:
    """Run open, update (every member) and close; raise `HookFailed` naming the hook."""
    hook = "open"
    try:
        session = processor.open(key, members[0].fragment.value)
        hook = "update"
        for member in members:
            replacement = processor.update(session, member.fragment.value)
            if replacement is not None:
                session = replacement
        hook = "close"
        result = processor.close(key, session)
    except Exception as exc:  # a user hook: any failure goes to the dead letters
        raise HookFailed(hook, describe(exc)) from exc
    if not isinstance(result, Mapping):
        raise HookFailed("close", f"close() must return a dict, got {type(result).__name__}")
    return dict(result)


def event_time(value: object) -> int:
    """Return `timestamp()`'s result as an int, or raise if it is not a valid event time."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise TypeError(f"timestamp() must return epoch milliseconds, got {value!r}")
    millis = int(value)
    # Out of range, the state could not be encoded at the next commit (msgpack ints).
    if not MIN_EVENT_TIME_MS <= millis <= MAX_EVENT_TIME_MS:
        raise ValueError(
            f"timestamp() returned {value!r}, outside the valid event times "
            f"[{MIN_EVENT_TIME_MS}, {MAX_EVENT_TIME_MS}] ms"
        )
    return millis


def valid_time(value: object) -> bool:
    """Return True for an int event time within the valid range (a watermark's time)."""
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and MIN_EVENT_TIME_MS <= value <= MAX_EVENT_TIME_MS
    )


def describe(exc: BaseException) -> str:
    """Return "ExceptionType: message", as dead letters carry it."""
    return f"{type(exc).__name__}: {exc}"
