"""`Lifecycle`: what `with` does for every object of the project that is started and stopped.

Entering starts the object (`_open`) and gives the object itself; leaving stops it
(`_close`), also when the block raised.  A class says how it starts and stops in
those two methods and keeps its own names for them (`up`/`down`, `start`/`stop`,
`build`/`close`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self

__all__ = ["Lifecycle"]


class Lifecycle(ABC):
    """A context manager that starts its object on entry and stops it on exit."""

    __slots__ = ()

    def _open(self) -> object:
        """Start (called on entering `with`); by default there is nothing to start."""
        return None

    @abstractmethod
    def _close(self) -> None:
        """Stop (called on leaving `with`, also on an exception)."""

    def __enter__(self) -> Self:
        self._open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._close()
