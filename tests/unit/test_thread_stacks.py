"""Where a process hangs: SIGUSR1 logs every thread's stack and the process runs on; a node
whose stop outlives its deadline logs them before it exits; a waited-for process that does not
exit is reported with its stacks and the end of its log (`framework.processes.ProcessStuck`),
and that log is its own, not overwritten when its name is started again."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from framework.cluster import wait_until
from framework.kernel.stacks import STACKS_SIGNAL, Stacks, stacks_on_signal, thread_stacks
from framework.node.runner import EXIT_FORCED
from framework.processes import ProcessGroup, ProcessStuck

ROOT = Path(__file__).resolve().parents[2]


def waits_here(released: threading.Event) -> None:
    released.wait()


def test_thread_stacks_show_where_each_thread_is() -> None:
    released = threading.Event()
    waiter = threading.Thread(target=waits_here, args=(released,), name="waiter")
    waiter.start()
    try:
        stacks = thread_stacks()
    finally:
        released.set()
        waiter.join()
    (waiter_stack,) = [calls for name, calls in stacks.items() if name.startswith("waiter (")]
    assert any(call.endswith(" in waits_here") for call in waiter_stack)
    (main,) = [calls for name, calls in stacks.items() if name.startswith("MainThread (")]
    assert main[-1].endswith(" in thread_stacks")  # innermost last


def test_the_signal_reports_from_another_thread_and_is_given_back() -> None:
    before = signal.getsignal(STACKS_SIGNAL)
    reports: list[tuple[str, Stacks]] = []
    with stacks_on_signal(lambda s: reports.append((threading.current_thread().name, s))) as on:
        assert on
        signal.raise_signal(STACKS_SIGNAL)
        wait_until(lambda: bool(reports), 30, "the stacks to be reported")
    assert signal.getsignal(STACKS_SIGNAL) is before
    thread, stacks = reports[0]
    assert thread == "stacks"  # never from inside the signal handler
    assert any(name.startswith("MainThread (") for name in stacks)


def test_a_signal_the_process_already_handles_is_left_alone() -> None:
    def own(_signum: int, _frame: object) -> None:
        pass

    before = signal.signal(STACKS_SIGNAL, own)
    try:
        with stacks_on_signal(lambda s: None) as on:
            assert not on
            assert signal.getsignal(STACKS_SIGNAL) is own
        assert signal.getsignal(STACKS_SIGNAL) is own
    finally:
        signal.signal(STACKS_SIGNAL, before)


# A node whose loop ignores stop(): it logs its stacks on SIGUSR1 and runs on; on SIGTERM it
# is forced out at the shutdown deadline (session timeout + 4 s), its stacks logged first.
_NODE = """
import logging, sys, threading, structlog
from framework.kernel.config import ConnectionConfig
from framework.node.config import NodeConfig
from framework.node.runner import run_until_signalled

structlog.configure(
    processors=[structlog.processors.JSONRenderer()],
    logger_factory=structlog.PrintLoggerFactory(file=sys.stdout),
)

def stuck_in_run():
    print('{"event": "running"}', flush=True)
    threading.Event().wait()

class Node:  # what run_until_signalled uses of a node
    def __init__(self, config):
        self.config = config
    def run(self):
        stuck_in_run()
    def stop(self):
        pass

config = NodeConfig(ConnectionConfig("z:1", "k:1"), "m:C", node_id="n1", session_timeout=1.0)
sys.exit(run_until_signalled(Node(config)))
"""


def _events(lines: list[str], name: str) -> list[dict[str, object]]:
    return [e for e in map(json.loads, lines) if e.get("event") == name]


def test_a_node_logs_its_stacks_when_asked_and_before_a_forced_exit() -> None:
    node = subprocess.Popen(
        [sys.executable, "-c", _NODE], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(node.stdout or ()), daemon=True)
    reader.start()
    try:
        wait_until(lambda: bool(_events(lines, "running")), 60, "the node to run")
        node.send_signal(STACKS_SIGNAL)
        wait_until(lambda: bool(_events(lines, "thread_stacks")), 30, "its stacks")
        assert node.poll() is None  # asked for stacks, it runs on
        node.send_signal(signal.SIGTERM)
        assert node.wait(timeout=60) == EXIT_FORCED
        reader.join(timeout=30)
    finally:
        node.kill()
        node.wait()
    asked, forced = _events(lines, "thread_stacks")
    for event in (asked, forced):
        threads = event["threads"]
        assert isinstance(threads, dict)
        calls = [call for stack in threads.values() for call in stack]
        assert any(call.endswith(" in stuck_in_run") for call in calls), event
    assert _events(lines, "shutdown_deadline_exceeded")


# A child that logs JSON lines and its stacks on SIGUSR1, then waits for nothing.
_STUCK = """
import json, threading
from framework.kernel.stacks import stacks_on_signal

def report(stacks):
    print(json.dumps({"event": "thread_stacks", "threads": stacks}), flush=True)

def never_returns():
    print(json.dumps({"event": "closing"}), flush=True)
    threading.Event().wait()

with stacks_on_signal(report):
    never_returns()
"""


@pytest.mark.parametrize("dumps_stacks", [True, False], ids=["with-stacks", "log-only"])
def test_a_process_that_does_not_exit_is_reported_with_its_stacks_and_log(
    tmp_path: Path, dumps_stacks: bool
) -> None:
    with ProcessGroup(tmp_path) as group:
        child = group.spawn("m0", [sys.executable, "-c", _STUCK], dumps_stacks=dumps_stacks)
        wait_until(lambda: bool(child.events("closing")), 60, "the child to log")
        with pytest.raises(ProcessStuck) as stuck:
            child.wait(timeout=0.1)  # it never exits: the timeout only bounds the test
    report = str(stuck.value)
    assert stuck.value.node == "m0"
    assert report.startswith(f"m0 (pid {child.process.pid}) still runs 0.1 s after")
    assert '"event": "closing"' in report
    assert ("in never_returns" in report) is dumps_stacks


def test_a_name_started_again_keeps_its_earlier_runs_logs(tmp_path: Path) -> None:
    """Each start has its own log: a stuck run's log is still there after its name restarts."""
    said = 'import json; print(json.dumps({"event": "run", "n": %d}), flush=True)'
    with ProcessGroup(tmp_path) as group:
        assert group.spawn("n2", [sys.executable, "-c", said % 0]).wait(timeout=60) == 0
        runs = []
        for n in (1, 2, 3):
            runs.append(group.spawn("n1", [sys.executable, "-c", said % n]))
            assert runs[-1].wait(timeout=60) == 0
    assert [[e["n"] for e in run.events("run")] for run in runs] == [[1], [2], [3]]
