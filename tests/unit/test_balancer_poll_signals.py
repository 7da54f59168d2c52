"""`Balancer.poll(timeout)` returns by its deadline even when a signal interrupts its wait.

CPython 3.11's `queue.SimpleQueue.get(timeout=...)`, interrupted by a signal whose handling
ends past the deadline, waits again with a negative time left, which means for ever: until
something is put.  A SIGTERM arriving while a quiet node or member waited for balancer
events ran its handler, and the loop that should have seen it never came back (CI 55: a
balancer member still ran 30 s after SIGTERM; `thread_stacks` put it in `_next_events`).
"""

from __future__ import annotations

import signal
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
POLL_S = 0.05
HANDLER_MARGIN_S = 0.5
"""The handler returns this long after poll's deadline (poll starts just after it is set)."""


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


def test_a_signal_handled_past_the_deadline_does_not_hold_poll(quiet_balancer: Balancer) -> None:
    handled: list[float] = []
    past_poll = time.monotonic() + POLL_S + HANDLER_MARGIN_S

    def slow_handler(_signum: int, _frame: FrameType | None) -> None:
        # As on a loaded machine: the interrupted wait resumes only after poll's deadline.
        wait_until(lambda: time.monotonic() > past_poll, 30, "poll's deadline to pass")
        handled.append(time.monotonic())

    rescued = threading.Event()

    def rescue() -> None:
        rescued.set()
        quiet_balancer._events.put(MembersChanged(("n1",)))

    before = signal.signal(signal.SIGUSR2, slow_handler)
    # To the main thread, whose wait it interrupts (delivered to another thread, it would not).
    main = threading.main_thread().ident
    assert main is not None
    signaller = threading.Timer(0.01, signal.pthread_kill, args=(main, signal.SIGUSR2))
    rescuer = threading.Timer(RESCUE_AFTER_S, rescue)
    try:
        rescuer.start()
        signaller.start()
        quiet_balancer.poll(POLL_S)
        returned_before_rescue = not rescued.is_set()
    finally:
        signaller.cancel()
        rescuer.cancel()
        signal.signal(signal.SIGUSR2, before)
    assert handled, "the signal came while poll waited"
    assert returned_before_rescue, "poll waited until an event came, not until its deadline"
