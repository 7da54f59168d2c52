"""Every thread's stack on demand, for a process that hangs.

`kill -USR1 <pid>` has a node (or a test's balancer member) log the stack of each
of its threads as one `thread_stacks` event, and run on: what `jstack` gives for a
JVM, in the process's own log format.  The handler only starts a thread that reads
the stacks and logs them, so it never writes from inside a signal handler.  It runs
while the main thread runs Python or waits (a join, a lock, a sleep, a select); a
main thread stuck inside a C call shows as no event.
"""

from __future__ import annotations

import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Final

__all__ = ["STACKS_SIGNAL", "Stacks", "stacks_on_signal", "thread_stacks"]

STACKS_SIGNAL: Final = signal.SIGUSR1

Stacks = dict[str, list[str]]
"""Each thread's calls, outermost first, by `name (id)`: what `thread_stacks` gives."""


def thread_stacks() -> Stacks:
    """Every live thread's stack now, each call as `file:line in function`.

    The thread the signal interrupted shows where it was, without the handler's own calls.
    """
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    return {
        f"{names.get(ident, 'unnamed')} ({ident:#x})": _calls(frame)
        for ident, frame in sys._current_frames().items()
    }


def _calls(frame: FrameType) -> list[str]:
    calls = []
    for call in traceback.extract_stack(frame):
        if call.filename == __file__ and call.name == "asked":
            break
        calls.append(f"{call.filename}:{call.lineno} in {call.name}")
    return calls


@contextmanager
def stacks_on_signal(report: Callable[[Stacks], None]) -> Iterator[bool]:
    """Inside the block `STACKS_SIGNAL` calls `report(thread_stacks())` on a new thread.

    Gives False, and leaves the signal alone, when the process already handles it.
    """
    if signal.getsignal(STACKS_SIGNAL) is not signal.SIG_DFL:
        yield False
        return

    def asked(_signum: int, _frame: FrameType | None) -> None:
        threading.Thread(target=lambda: report(thread_stacks()), name="stacks", daemon=True).start()

    previous = signal.signal(STACKS_SIGNAL, asked)
    try:
        yield True
    finally:
        signal.signal(STACKS_SIGNAL, previous)
