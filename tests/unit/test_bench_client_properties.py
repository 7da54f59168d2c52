"""`benchmarks.client_properties`: its property sets as given, and what it reads from /proc."""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchmarks.client_properties import ProcWatch, parse_set
from framework.testing.members import wait_for


def test_a_set_is_a_name_and_its_properties() -> None:
    assert parse_set("small=queued.max.messages.kbytes=8192,fetch.max.bytes=8388608") == (
        "small",
        {"queued.max.messages.kbytes": "8192", "fetch.max.bytes": "8388608"},
    )
    assert parse_set("node=") == ("node", {})


@pytest.mark.parametrize("text", ["node", "=a=1", "x=a", "x=a=1,=2"])
def test_a_malformed_set_is_refused_naming_it(text: str) -> None:
    with pytest.raises(SystemExit, match="--set"):
        parse_set(text)


def test_a_watched_process_keeps_its_last_figures_after_it_exits() -> None:
    # The child touches 64 MiB, then waits for its stdin to close.
    child = subprocess.Popen(
        [sys.executable, "-c", "b = bytearray(64 << 20); import sys; sys.stdin.read()"],
        stdin=subprocess.PIPE,
    )
    watch = ProcWatch(child.pid, interval=0.01)
    try:
        wait_for(lambda: watch.peak_rss_mb >= 64, 30, "the child's 64 MiB")
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=30)
    watch.stop()
    assert watch.minor_faults > 64 * 256 // 2  # most of the 16,384 pages were faulted in
    assert watch.peak_rss_mb >= 64


def test_the_loop_waits_are_those_within_the_run() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=30)
    watch = ProcWatch(child.pid)  # gone already: the watch reads nothing
    watch.stop()
    watch.waits = [(100.5, 0.2), (103.7, 0.4), (106.9, 0.35), (109.9, 0.2), (110.4, 0.9)]

    assert watch.loop_waits(101.0, 110.0) == [0.4, 0.35]
    assert watch.minor_faults == 0
