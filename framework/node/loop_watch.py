"""`LoopWatch`: a thread that says when the node's loop stopped stepping, and where it waits.

Every call the loop makes has a deadline, and a step normally ends within the stall
limit (`NodeConfig.stall_limit`: a flush, then a commit round). A call without one
held a node silently: it read nothing and logged nothing (confluent-kafka 2.16's
`Producer.close()` aborts a transaction with no deadline; docs/exactly-once.md).
`/healthz` answers 503 then, when it is served; this thread also logs it, once
per stall and with the loop thread's stack, so that the stall names its cause.
It only reads: the time of the last step, and the loop thread's frames.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any, Final

from framework.kernel.lifecycle import Lifecycle

__all__ = ["LoopWatch"]

_STACK_FRAMES: Final = 25
"""The innermost frames logged: where the loop waits, and what called it."""


class LoopWatch(Lifecycle):
    """Logs `loop_stalled` (with the loop thread's stack) once the loop has not stepped for
    `limit` seconds, and `loop_recovered` when it steps again.

    A warning, not an error: a step of several calls, each within its deadline, may last
    that long too (an assignment's takes while a broker restarts).
    """

    def __init__(
        self,
        last_step: Callable[[], float],
        limit: float,
        log: Any,
        *,
        loop_thread: int | None = None,
    ) -> None:
        self._last_step = last_step
        self._limit = limit
        self._log = log
        self._loop_thread = threading.get_ident() if loop_thread is None else loop_thread
        """The thread whose stack a stall shows (default: the one that made the watch)."""
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="loop-watch", daemon=True)

    def _open(self) -> None:
        self._thread.start()

    def _close(self) -> None:
        self._done.set()
        self._thread.join()

    def _watch(self) -> None:
        stalled_at: float | None = None  # the last step before the stall reported
        while True:
            done = self._done.wait(self._limit / 4)
            stalled_at = self._look(stalled_at, done)
            if done:
                return

    def _look(self, stalled_at: float | None, done: bool) -> float | None:
        """Say a stall's end (also at the watch's own end), or a new stall (not then)."""
        last = self._last_step()
        if stalled_at is not None and last > stalled_at:
            self._log.warning("loop_recovered", stalled_s=round(last - stalled_at, 1))
            stalled_at = None
        age = time.monotonic() - last
        if stalled_at is None and age >= self._limit and not done:
            self._log.warning(
                "loop_stalled",
                stalled_s=round(age, 1),
                limit_s=self._limit,
                stack=self._stack(),
                note="the node reads and commits nothing meanwhile; /healthz answers 503; "
                "the stack shows the call that blocks",
            )
            return last
        return stalled_at

    def _stack(self) -> str:
        """The loop thread's innermost frames, as a traceback prints them."""
        frame = sys._current_frames().get(self._loop_thread)
        if frame is None:
            return "(the loop thread has ended)"
        return "".join(traceback.format_stack(frame)[-_STACK_FRAMES:])
