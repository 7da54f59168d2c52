"""Errors raised by the session engine and by invalid stream processors."""

from __future__ import annotations

from framework.kernel.errors import SessionizerError

__all__ = ["OffsetOrderError", "ProcessorError", "SessionError", "SinkError"]


class SessionError(SessionizerError):
    """Base class of the errors raised by `sessionizer`."""


class ProcessorError(SessionError):
    """A `StreamProcessor` subclass is defined wrongly (for example a negative timeout)."""


class OffsetOrderError(SessionError):
    """Records reached a stream's engine out of offset order, or before its resume point."""


class SinkError(SessionError):
    """Finished sessions or dead letters could not be delivered; state must not be committed."""
