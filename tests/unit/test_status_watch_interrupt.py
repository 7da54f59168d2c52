"""`sessionizer status --watch` ends with 0 on Ctrl-C, whatever it was doing when it came.

The race CI hit: SIGINT raises KeyboardInterrupt in the main thread at any
bytecode, also inside kazoo's `KazooClient._call`, whose bare `except:` around
waking its connection thread swallows it and fails the request with
`ConnectionClosedError` instead; the watch then ended with exit 2 ("the cluster
did not answer") and the Ctrl-C was lost.  These tests put the Ctrl-C exactly
there, through kazoo's own code, with no server: a client that believes it is
connected, whose wake-up socket delivers the SIGINT.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss
from kazoo.protocol.states import KeeperState, ZnodeStat

from framework.commands import status

STAT = ZnodeStat(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)


class _InterruptingSocket:
    """kazoo's wake-up socket: sending to it is when Ctrl-C comes."""

    def send(self, _data: bytes) -> int:
        signal.raise_signal(signal.SIGINT)
        return 1


def interrupted_request() -> None:
    """A ZooKeeper read through kazoo's request path, Ctrl-C arriving in the middle of it;
    answered (as a server would) if it is still pending afterwards."""
    client = KazooClient(hosts="127.0.0.1:1")  # never started: nothing is sent anywhere
    client._state = KeeperState.CONNECTED
    client._connection._write_sock = _InterruptingSocket()
    result = client.get_async("/sessionizer/apps/sessionizer/claimed_streams")
    if not result.ready():
        result.set((b"", STAT))
    result.get()


class FakeClient:
    def exists(self, _path: str) -> None:
        return None  # no quarantined_streams yet: no third watch


class FakeReader:
    """`StatusReader` reading nothing: each read runs the next step (then returns a document)."""

    steps: list[Callable[[], None]] = []
    reads = 0

    def __init__(self, _client: object, _connection: object) -> None:
        pass

    def read(self) -> dict[str, Any]:
        FakeReader.reads += 1
        assert FakeReader.steps, "the watch read again after Ctrl-C"
        FakeReader.steps.pop(0)()
        return {"errors": [], "read": FakeReader.reads}


@pytest.fixture
def watch(monkeypatch: pytest.MonkeyPatch) -> Callable[..., int]:
    """`status.run` for `--watch --json` with ZooKeeper, its watches and the reads faked."""

    @contextmanager
    def app_client(_connection: object) -> Iterator[FakeClient]:
        yield FakeClient()

    monkeypatch.setattr(status, "app_client", app_client)
    monkeypatch.setattr(status, "streams_for", lambda *_args: None)
    monkeypatch.setattr(status, "ChildrenWatch", lambda *_args: None)
    monkeypatch.setattr(status, "StatusReader", FakeReader)

    def run(*steps: Callable[[], None], refresh: float = 0.01) -> int:
        monkeypatch.setattr(status, "_REFRESH_SECONDS", refresh)
        FakeReader.steps, FakeReader.reads = list(steps), 0
        args = argparse.Namespace(
            zk="127.0.0.1:1", bootstrap="127.0.0.1:1", app="sessionizer", json=True, watch=True
        )
        # Python's own handler, as a terminal's `sessionizer` has it: a job started in the
        # background (CI's test processes) inherits SIGINT ignored, and the CLI leaves that be.
        outer = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            return status.run(args)
        finally:
            restored = signal.getsignal(signal.SIGINT)
            signal.signal(signal.SIGINT, outer)
            assert restored is signal.default_int_handler  # put back as it was

    return run


def nothing() -> None:
    pass


def ctrl_c() -> None:
    signal.raise_signal(signal.SIGINT)


def test_ctrl_c_inside_a_zookeeper_request_exits_0(
    watch: Callable[..., int], capsys: pytest.CaptureFixture[str]
) -> None:
    assert watch(nothing, interrupted_request) == 0
    assert FakeReader.reads == 2
    assert capsys.readouterr().out.splitlines() == ['{"errors": [], "read": 1}']


def test_ctrl_c_between_frames_exits_0_without_waiting_for_the_refresh(
    watch: Callable[..., int],
) -> None:
    # Sent from another thread once the first read is under way: it lands in the wait
    # between frames (or, on a slow machine, still in that read: the same clean exit).
    timer = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT))
    started = time.monotonic()
    try:
        assert watch(timer.start, refresh=30.0) == 0
    finally:
        timer.cancel()
    assert time.monotonic() - started < 10
    assert FakeReader.reads == 1


def test_a_second_ctrl_c_does_not_wait_for_the_read_in_flight(
    watch: Callable[..., int],
) -> None:
    def hangs_twice() -> None:
        ctrl_c()
        interrupted_request()  # the second Ctrl-C, inside kazoo: still a clean exit
        raise AssertionError("not reached: the second Ctrl-C ends the read")

    assert watch(nothing, hangs_twice) == 0

    def hangs() -> None:
        ctrl_c()
        ctrl_c()
        raise AssertionError("not reached: the second Ctrl-C ends the read")

    assert watch(hangs) == 0


def test_zookeeper_failing_without_ctrl_c_is_still_an_error(watch: Callable[..., int]) -> None:
    def fails() -> None:
        raise ConnectionLoss()

    with pytest.raises(ConnectionLoss):  # `sessionizer` turns it into exit 2, as before
        watch(nothing, fails)
