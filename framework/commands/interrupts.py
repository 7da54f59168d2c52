"""Signal handlers a command installs for the length of a `with`, and puts back after."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from types import FrameType

__all__ = ["Handler", "signals_calling"]

Handler = Callable[[int, FrameType | None], None]


@contextmanager
def signals_calling(
    handler: Handler, signals: Iterable[int], *, only_over_default: bool = False
) -> Iterator[None]:
    """While inside, each of `signals` calls `handler`; its previous handler comes back after.

    Only in the main thread (the only one that may set handlers; elsewhere a no-op).
    `only_over_default`: a signal whose handler is not Python's default (SIGINT
    ignored by a background job, or a caller's own handler) is left as it is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for signum in signals:
        current = signal.getsignal(signum)
        if only_over_default and current is not _python_default(signum):
            continue
        previous[signum] = signal.signal(signum, handler)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def _python_default(signum: int) -> object:
    return signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL
