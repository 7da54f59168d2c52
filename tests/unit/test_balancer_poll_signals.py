"""`Balancer.poll(timeout)` returns by its deadline even when a signal interrupts its wait.

CPython 3.11's `queue.SimpleQueue.get(timeout=...)`, interrupted by a signal whose handling
ends past the deadline, waits again with a negative time left, which means for ever: until
something is put.  A SIGTERM arriving while a quiet node or member waited for balancer
events ran its handler, and the loop that should have seen it never came back (CI 55: a
balancer member still ran 30 s after SIGTERM; `thread_stacks` put it in `_next_events`).
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType, SimpleNamespace

import pytest

from balancer import Balancer, BalancerConfig, BalancerState, NoopListener
from balancer.machine import MembersChanged
from framework.cluster import wait_until

RESCUE_AFTER_S = 10.0
"""When the test puts an event itself, so that a wait that would last for ever ends."""
POLL_S = 2.0
"""Time enough for the signaller to find the main thread waiting, however loaded the machine."""


@pytest.fixture
def quiet_balancer() -> Iterator[Balancer]:
    """A stable balancer with nothing due: `poll(timeout)` waits for events the whole time."""
    client = SimpleNamespace(connected=True)
    balancer = Balancer(BalancerConfig("zk:2181", "app", "n1"), NoopListener(), client=client)
    balancer._held = SimpleNamespace(  # type: ignore[assignment]
        reporter=SimpleNamespace(due=lambda now: False), leases={}
    )
    for state in (BalancerState.JOINING, BalancerState.BALANCING, BalancerState.STABLE):
        balancer._machine.to(state)
    balancer._due = None
    yield balancer


def _waiting_for_events(thread: int) -> FrameType | None:
    """The frame of `Balancer._next_events` if `thread` is inside it (waiting for events)."""
    frame = sys._current_frames().get(thread)
    while frame is not None and frame.f_code.co_name != "_next_events":
        frame = frame.f_back
    return frame


def test_a_signal_handled_past_the_deadline_does_not_hold_poll(quiet_balancer: Balancer) -> None:
    main = threading.main_thread().ident
    assert main is not None
    deadline: list[float] = []  # poll's, read from its frame once it waits
    handled, rescued = threading.Event(), threading.Event()

    def signal_the_wait() -> None:
        def waiting() -> bool:
            frame = _waiting_for_events(main)
            if frame is not None:
                deadline.append(frame.f_locals["until"])
            return frame is not None

        wait_until(waiting, 30, "the main thread to wait for events", interval=0.001)
        # To the main thread, whose wait it interrupts (delivered to another, it would not).
        signal.pthread_kill(main, signal.SIGUSR2)

    def slow_handler(_signum: int, _frame: FrameType | None) -> None:
        # As on a loaded machine: the interrupted wait resumes only after its deadline.
        wait_until(lambda: time.monotonic() > deadline[0], 30, "poll's deadline to pass")
        handled.set()

    def rescue() -> None:
        rescued.set()
        quiet_balancer._events.put(MembersChanged(("n1",)))

    before = signal.signal(signal.SIGUSR2, slow_handler)
    signaller = threading.Thread(target=signal_the_wait, daemon=True)
    rescuer = threading.Timer(RESCUE_AFTER_S, rescue)
    try:
        rescuer.start()
        signaller.start()
        quiet_balancer.poll(POLL_S)
        returned_before_rescue = not rescued.is_set()
    finally:
        rescuer.cancel()
        signaller.join(timeout=60)
        if deadline:  # the signal went: its handler runs before the default is back
            wait_until(handled.is_set, 60, "the handler to run")
        signal.signal(signal.SIGUSR2, before)
    assert handled.is_set(), "the signal was sent and handled"
    assert returned_before_rescue, "poll waited until an event came, not until its deadline"
