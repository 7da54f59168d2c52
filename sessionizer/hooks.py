"""Calling a processor's hooks safely: the fold, and the validation of what hooks return.

Every failure of user code becomes a value the engine turns into a dead letter;
nothing a hook returns or raises can stop a stream or make its state unencodable.
"""

from __future__ import annotations

import math
import numbers
import traceback
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Final, SupportsInt, cast

from framework.kernel.fragment import Fragment
from framework.kernel.limits import MAX_EVENT_TIME_MS, MIN_EVENT_TIME_MS
from sessionizer.errors import HookError
from sessionizer.processor import StreamProcessor
from sessionizer.records import FoldedHookFailure, HookFailure
from sessionizer.segment import Failure, Member, Segment
from sessionizer.timeline import KeyTimeline

__all__ = [
    "HookFailed",
    "close",
    "dead_letters",
    "describe",
    "event_time",
    "fold",
    "fold_below",
    "is_end",
    "keeps_default",
    "timestamp",
    "trace",
    "valid_time",
]


_CALLERS: Final = frozenset(
    {
        __name__,
        "sessionizer.engine",
        "sessionizer.open_sessions",
        "sessionizer.declarative",
        "sessionizer.declarative_conditions",
        "sessionizer.declarative_folds",
    }
)
"""The modules that call the user's hooks, and a declarative processor's own (their frames
are not in a hook's `trace`: compiled, they are not Python frames)."""


class HookFailed(HookError):
    """A fold hook raised or returned something unusable; names the hook."""

    def __init__(self, hook: str, error: str, trace: str = "") -> None:
        super().__init__(f"{hook}: {error}")
        self.hook = hook
        self.error = error
        self.trace = trace
        """The traceback text where the hook raised ("" if it returned something unusable)."""


def fold_below(processor: StreamProcessor[Any], timeline: KeyTimeline, line: int) -> None:
    """Fold every raw member of a key whose event time is below `line`, in event-time order."""
    key = timeline.key
    segments: list[Segment] = timeline  # iterated as the list it is (timeline.py says why)
    for segment in segments:
        raw = segment.raw
        count = 0
        while count < len(raw) and raw[count][0] < line:
            fold(processor, key, segment, raw[count])
            count += 1
        if count < len(raw):
            if count:
                segment.raw = raw[count:]
            return  # the rest of the key sorts after a member at or above the line
        segment.raw = ()


def fold(processor: StreamProcessor[Any], key: str, segment: Segment, member: Member) -> None:
    """Fold a session's first raw member into it: `open` (first member) then `update`.

    A hook that raises marks the session failed (`segment.failure`, keeping the
    fragment it failed on); the members after it are absorbed without hooks, so the
    session keeps its boundaries and goes to the dead letters whole when it ends.
    """
    if segment.failure is None:
        value = member[4].value
        hook = "update"
        try:
            if not segment.folded:
                hook = "open"
                segment.state = processor.open(key, value)
                hook = "update"
            replacement = processor.update(segment.state, value)
            if replacement is not None:
                segment.state = replacement
        except Exception as exc:  # a user hook: any failure goes to the dead letters
            segment.failure = Failure(hook, describe(exc), member[4], trace(exc))
            segment.state = None
    segment.absorb(member)


def close(processor: StreamProcessor[Any], key: str, segment: Segment) -> dict[str, Any]:
    """Return `close()`'s result for a fully folded session; raise `HookFailed` naming the hook."""
    if segment.failure is not None:
        failure = segment.failure
        raise HookFailed(failure.hook, failure.error, failure.traceback)
    try:
        result = processor.close(key, segment.state)
    except Exception as exc:  # a user hook: any failure goes to the dead letters
        raise HookFailed("close", describe(exc), trace(exc)) from exc
    # A dict first: `isinstance` against the `Mapping` ABC costs a call into `abc`.
    if type(result) is not dict and not isinstance(result, Mapping):
        problem = f"TypeError: close() must return a dict, got {type(result).__name__}"
        raise HookFailed("close", problem)
    return dict(result)


def dead_letters(
    key: str, segment: Segment, pending: Sequence[Member], session_id: str, failed: HookFailed
) -> list[HookFailure | FoldedHookFailure]:
    """Return the dead letters of a failed session: one per fragment, in event-time order.

    A `HookFailure` with the fragment for those whose bytes are still held (`pending`:
    raw when the session ended; or the one a hook failed on), else a
    `FoldedHookFailure` naming its offset.  `segment` must be fully folded.
    """
    held = {member[1]: member[4] for member in pending}
    if segment.failure is not None and segment.failure.fragment is not None:
        held[segment.failure.fragment.offset] = segment.failure.fragment
    letters: list[HookFailure | FoldedHookFailure] = []
    for offset in segment.folded_offsets():
        fragment = held.get(offset)
        if fragment is None:
            letters.append(
                FoldedHookFailure(offset, key, failed.hook, failed.error, session_id, failed.trace)
            )
        else:
            letters.append(
                HookFailure(fragment, failed.hook, failed.error, session_id, failed.trace)
            )
    return letters


def keeps_default(processor: StreamProcessor[Any], hook: str) -> bool:
    """True if the processor's `hook` is `StreamProcessor`'s own, which the engine need not call.

    The defaults of `timestamp` (the record's timestamp) and `is_end` (never) are
    what most processors keep; not calling them saves two Python calls per fragment.
    """
    own = getattr(processor, "__dict__", {})
    default = getattr(StreamProcessor, hook)
    return hook not in own and getattr(type(processor), hook, None) is default


def timestamp(processor: StreamProcessor[Any], fragment: Fragment) -> int:
    """Return the fragment's event time by the processor's `timestamp` hook (`event_time`).

    The hook is called as `Any`: compiled code (`SESSIONIZER_HOT_PATH=compiled`) would
    otherwise check its result against the declared `int` and refuse a float.
    """
    hook: Any = processor.timestamp
    value = hook(fragment.value, fragment.timestamp_ms)
    if type(value) is int and MIN_EVENT_TIME_MS <= value <= MAX_EVENT_TIME_MS:
        return value  # the common case (the record timestamp), without a call
    return event_time(value)


def is_end(processor: StreamProcessor[Any], fragment: Fragment) -> bool:
    """Return the processor's `is_end` of the fragment as a bool (any truthy value ends it).

    Called as `Any`, for the reason `timestamp` gives.
    """
    hook: Any = processor.is_end
    return bool(hook(fragment.value))


def event_time(value: object) -> int:
    """Return `timestamp()`'s result as an int, or raise if it is not a valid event time."""
    if type(value) is int and MIN_EVENT_TIME_MS <= value <= MAX_EVENT_TIME_MS:
        return value  # the common case (the record timestamp), without the ABC check
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise HookError(
            f"timestamp() must return epoch milliseconds (a finite int or float), got {value!r}"
        )
    millis = int(cast(SupportsInt, value))  # a Real: int() takes it
    # Out of range, the state could not be encoded at the next commit (msgpack ints).
    if not MIN_EVENT_TIME_MS <= millis <= MAX_EVENT_TIME_MS:
        raise HookError(
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


def trace(exc: BaseException) -> str:
    """Return the traceback text of an exception a hook raised, from the hook down.

    The engine's frames above the hook (the functions that called it and caught the
    exception), in the exception and in those it was raised from or while handling,
    are left out: compiled (`SESSIONIZER_HOT_PATH=compiled`) they are not Python
    frames, and a dead letter's bytes are the same on both paths.
    """
    chain: list[tuple[BaseException, TracebackType | None]] = []
    todo = [exc]
    while todo:
        item = todo.pop()
        if any(item is seen for seen, _ in chain):
            continue
        chain.append((item, item.__traceback__))
        todo += [e for e in (item.__cause__, item.__context__) if e is not None]
        if isinstance(item, BaseExceptionGroup):
            todo += item.exceptions
    try:  # the hook's part of each traceback, for as long as it takes to format them
        for item, tb in chain:
            while tb is not None and tb.tb_frame.f_globals.get("__name__") in _CALLERS:
                tb = tb.tb_next
            item.__traceback__ = tb
        return "".join(traceback.format_exception(exc))
    finally:
        for item, tb in chain:
            item.__traceback__ = tb
