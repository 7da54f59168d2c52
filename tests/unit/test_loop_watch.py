"""`LoopWatch`: a loop that stops stepping is logged once, with the call it waits in."""

from __future__ import annotations

import threading
import time
from typing import Any

import structlog
from structlog.testing import capture_logs

from framework.node.loop_watch import LoopWatch
from framework.testing.members import wait_for


def _closing_a_producer_with_no_deadline(released: threading.Event) -> None:
    """Stands for the call that blocked a node's loop (librdkafka's `Producer.close()`)."""
    released.wait()


def test_a_stalled_loop_is_logged_once_with_its_stack_and_its_recovery() -> None:
    released, last = threading.Event(), [time.monotonic()]
    loop = threading.Thread(target=_closing_a_producer_with_no_deadline, args=(released,))
    loop.start()
    log = structlog.get_logger("test").bind(node="n1")
    try:
        with capture_logs() as logs, LoopWatch(lambda: last[0], 0.2, log, loop_thread=loop.ident):

            def events(name: str) -> list[dict[str, Any]]:
                return [e for e in logs if e["event"] == name]

            wait_for(lambda: events("loop_stalled"), 10, "loop_stalled")
            (stalled,) = events("loop_stalled")  # once per stall, however long it lasts
            assert stalled["log_level"] == "warning" and stalled["node"] == "n1"
            assert stalled["stalled_s"] >= 0.2
            assert "_closing_a_producer_with_no_deadline" in stalled["stack"]
            released.set()
            last[0] = time.monotonic()  # the loop stepped again
            wait_for(lambda: events("loop_recovered"), 10, "loop_recovered")
            assert len(events("loop_stalled")) == 1
    finally:
        released.set()
        loop.join()


def test_a_loop_that_steps_is_never_reported() -> None:
    looks: list[float] = []

    def just_stepped() -> float:  # each look finds a step made a moment ago
        looks.append(time.monotonic())
        return looks[-1]

    with capture_logs() as logs, LoopWatch(just_stepped, 0.2, structlog.get_logger("test")):
        wait_for(lambda: len(looks) >= 8, 10, "the watch to look 8 times (two stall limits)")
    assert not [e for e in logs if str(e["event"]).startswith("loop_")]
