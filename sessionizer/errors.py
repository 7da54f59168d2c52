"""Errors raised by the session engine and by invalid stream processors."""

from __future__ import annotations

from framework.kernel.errors import SessionizerError

__all__ = [
    "AggregateError",
    "HookError",
    "OffsetOrderError",
    "ProcessorError",
    "SessionError",
    "SessionNotOpen",
    "SinkError",
]


class SessionError(SessionizerError):
    """Base class of the errors raised by `sessionizer`."""


class ProcessorError(SessionError):
    """A `StreamProcessor` subclass is defined wrongly (for example a negative timeout)."""


class HookError(SessionError, ValueError):
    """A processor hook failed or returned a value the engine cannot use.

    Never seen by a caller: the engine turns it into a dead letter (`timestamp`, the
    fold hooks' `sessionizer.hooks.HookFailed`) or the handover into a replay
    (`load_session`).
    """


class AggregateError(HookError):
    """An aggregate of a `DeclarativeProcessor` could not fold a fragment (a missing field,
    values that do not add or compare); names the aggregate.  Becomes dead letters."""


class OffsetOrderError(SessionError):
    """Records reached a stream's engine out of offset order, or before its resume point."""


class SessionNotOpen(SessionError):
    """A key has no open session at the given first offset (a truncation asked for one)."""


class SinkError(SessionError):
    """Finished sessions or dead letters could not be delivered; state must not be committed."""
