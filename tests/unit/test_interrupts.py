"""`signals_calling`: a command's signal handlers for the length of a `with`, put back after."""

from __future__ import annotations

import signal
import threading
from types import FrameType

from framework.commands.interrupts import signals_calling


def test_the_handler_runs_inside_and_the_previous_one_is_back_after() -> None:
    seen: list[int] = []

    def handler(signum: int, _frame: FrameType | None) -> None:
        seen.append(signum)

    before = signal.getsignal(signal.SIGUSR1)
    with signals_calling(handler, [signal.SIGUSR1]):
        signal.raise_signal(signal.SIGUSR1)
    assert seen == [signal.SIGUSR1]
    assert signal.getsignal(signal.SIGUSR1) is before


def test_only_over_default_leaves_an_ignored_signal_ignored() -> None:
    outer = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a background job inherits it
    try:
        with signals_calling(lambda *_: None, [signal.SIGINT], only_over_default=True):
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        signal.signal(signal.SIGINT, signal.default_int_handler)
        with signals_calling(lambda *_: None, [signal.SIGINT], only_over_default=True):
            assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, outer)


def test_outside_the_main_thread_nothing_is_installed() -> None:
    installed: list[object] = []

    def in_thread() -> None:
        with signals_calling(lambda *_: None, [signal.SIGUSR1]):
            installed.append(signal.getsignal(signal.SIGUSR1))

    before = signal.getsignal(signal.SIGUSR1)
    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join()
    assert installed == [before]
