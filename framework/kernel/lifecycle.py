"""`Lifecycle`: what `with` does for every object of the project that is started and stopped.

Entering starts the object (`_open`) and gives the object itself; leaving stops it
(`_close`), also when the block raised.  A class says how it starts and stops in
those two methods and keeps its own names for them (`up`/`down`, `start`/`stop`,
`build`/`close`).
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
from abc import ABC, abstractmethod
from collections.abc import Callable
from types import TracebackType
from typing import Final, Self

__all__ = ["Lifecycle", "die_with_parent"]

_PR_SET_PDEATHSIG: Final = 1


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


def die_with_parent() -> Callable[[], None]:
    """A `Popen(preexec_fn=...)` that has the child killed (SIGKILL) when this process dies.

    Linux's parent-death signal: a server, node or member a run started goes with it
    even when the run is killed hard and no `_close` runs.  libc is loaded here, in the
    parent, so that the child calls one C function between fork and exec.  (The signal
    comes when the *thread* that started the child ends: start children from a thread
    that outlives them, as the project's main threads do.)
    """
    prctl = _libc().prctl
    parent = os.getpid()

    def set_death_signal() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the line above: go now
            os._exit(1)

    return set_death_signal


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)  # this process's own symbols, libc's among them
