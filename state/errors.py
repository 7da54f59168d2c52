"""Errors raised while loading, encoding and committing a stream's state."""

from __future__ import annotations

from typing import TypeVar

from framework.kernel.errors import SessionizerError, StreamError

__all__ = [
    "CommitUncertainError",
    "CorruptStateError",
    "FencedError",
    "StateError",
    "StateTooLargeError",
    "caused_by",
]

E = TypeVar("E", bound=BaseException)


def caused_by(error: E, cause: BaseException | None) -> E:
    """`error` with `cause` as its `__cause__`: what `raise error from cause` sets, for an
    error handed back per stream in a batch's outcomes rather than raised."""
    error.__cause__ = cause
    return error


class StateError(SessionizerError):
    """Base class of the errors raised by `state`."""


class FencedError(StateError, StreamError):
    """Another owner wrote the stream's state since we took it: we no longer own the stream."""

    def __init__(self, stream: str, *, expected: int, found: int | None) -> None:
        self.expected = expected
        self.found = found
        now = "the record is gone" if found is None else f"it is now at version {found}"
        super().__init__(
            stream,
            f"state commit fenced (expected version {expected}, {now}); "
            "another node has taken the stream, so drop it without committing and rebalance",
        )


class StateTooLargeError(StateError, StreamError):
    """The encoded state does not fit the store's size limit; nothing was written."""

    def __init__(
        self, stream: str, *, size: int, limit: int, entries: int, uncompressed: bool = False
    ) -> None:
        self.size = size
        self.limit = limit
        self.entries = entries
        # `uncompressed`: the msgpack body before zlib exceeds the bound decode inflates to.
        what = "uncompressed" if uncompressed else "encoded"
        super().__init__(
            stream,
            f"{what} state is {size} bytes, over the limit of {limit} bytes "
            f"({entries} ignore-list entries); nothing was written. Lower the processor's "
            "max_session_duration so fewer sessions finish while the oldest one is open, "
            "or use a state store made for large state",
        )


class CorruptStateError(StateError, StreamError):
    """A stored state record cannot be decoded."""

    def __init__(self, stream: str, problem: str) -> None:
        self.problem = problem
        super().__init__(
            stream,
            f"stored state cannot be decoded ({problem}); the stream is "
            "quarantined: no node takes it until an operator runs `sessionizer streams reset "
            f"{stream} --from-offset N` (or a node that reads this format takes it)",
        )


class CommitUncertainError(StateError, StreamError):
    """The connection dropped during a commit: it may or may not have been written."""

    def __init__(self, stream: str, detail: str) -> None:
        super().__init__(
            stream,
            f"the state commit's outcome is unknown ({detail}); the node drops "
            "the stream without committing again, and whoever takes it next resumes from the "
            "last certain commit",
        )
