"""Named child processes with JSON-lines logs, always reaped: the demo's nodes, and the tests'.

A `ProcessGroup` starts commands (each a `MemberProcess` with its log file) and
kills and reaps every one still running when it closes; if the process that started
them dies without closing it (kill -9), the kernel kills them. Product code (the demo)
and test support (`framework.testing`) both build on it; it imports nothing
of the test support.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from framework.cluster.process import wait_until
from framework.kernel.errors import ClusterError, MemberError
from framework.kernel.lifecycle import Lifecycle, die_with_parent
from framework.kernel.stacks import STACKS_SIGNAL

__all__ = ["MemberProcess", "ProcessGroup", "ProcessStuck"]

# How much of a stuck process's log and stacks its error shows, and how long it waits for them.
LOG_TAIL_LINES: Final = 12
STACK_CALLS: Final = 12
STACKS_WAIT_S: Final = 10.0


class ProcessStuck(MemberError):
    """A node or member still ran when it was waited for: where its threads were, and its log."""

    def __init__(self, node: str, pid: int, timeout: float, report: str) -> None:
        self.report = report
        super().__init__(
            node, f"{node} (pid {pid}) still runs {timeout:g} s after it was waited for\n{report}"
        )


@dataclass
class MemberProcess:
    """One child process (a node or a balancer member) and its JSON-lines log."""

    node: str
    process: subprocess.Popen[bytes]
    log_path: Path
    dumps_stacks: bool = False  # it logs a `thread_stacks` event on `STACKS_SIGNAL`

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        """Parsed log lines so far (only those with event `name`, if given)."""
        lines = self.log_path.read_text(errors="replace").splitlines()
        parsed = []
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line cut short by kill -9
            if name is None or event.get("event") == name:
                parsed.append(event)
        return parsed

    def assignment(self) -> set[str] | None:
        """The streams of the last `assignment` line, or None before the first."""
        lines = self.events("assignment")
        return set(lines[-1]["streams"]) if lines else None

    def send(self, signum: int) -> None:
        """Send a signal if the process still runs."""
        if self.process.poll() is None:
            self.process.send_signal(signum)

    def wait(self, timeout: float) -> int:
        """Wait for exit; return the exit code.

        Raises `ProcessStuck` if it still runs after `timeout` (it is left running: the
        group kills it), saying where its threads are and how its log ends.
        """
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ProcessStuck(self.node, self.process.pid, timeout, self.where_stuck()) from None

    def where_stuck(self) -> str:
        """The end of its log, then (if it runs and can say) where each of its threads is."""
        tail = self.log_path.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
        report = "its log ends:\n" + "\n".join(tail)
        if self.dumps_stacks and self.process.poll() is None:
            report += "\nits threads, innermost call last:\n" + self._stacks()
        return report

    def _stacks(self) -> str:
        """Ask for a `thread_stacks` event and render it."""
        before = len(self.events("thread_stacks"))
        self.send(STACKS_SIGNAL)
        try:
            wait_until(
                lambda: len(self.events("thread_stacks")) > before,
                STACKS_WAIT_S,
                f"{self.node}'s thread stacks",
                interval=0.05,
            )
        except ClusterError:
            return f"(none logged within {STACKS_WAIT_S:g} s: its main thread may be inside C)"
        threads: dict[str, list[str]] = self.events("thread_stacks")[-1]["threads"]
        return "\n".join(
            f"{name}:\n" + "\n".join(f"  {call}" for call in calls[-STACK_CALLS:])
            for name, calls in threads.items()
        )


class ProcessGroup(Lifecycle):
    """Named processes of one run; on exit every one still running is killed.

    Each process's JSON-lines log (stdout, or stderr with `log_stderr`) goes to
    `<directory>/<name>.<n>.jsonl`, `n` counting the group's starts (a node started
    again under its name keeps its earlier runs' logs); the child imports this
    installation's packages however the parent was started, and gets `env` on top of
    the parent's environment (secrets such as `SESSIONIZER_ZK_AUTH` go there, never on
    the command line, which anyone on the machine can read).
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.members: dict[str, MemberProcess] = {}
        self._spawned = 0  # numbers the logs: a name started again keeps its earlier logs

    def spawn(
        self,
        name: str,
        command: list[str],
        *,
        log_stderr: bool = False,
        env: Mapping[str, str] | None = None,
        dumps_stacks: bool = False,
    ) -> MemberProcess:
        """Start `command` as member `name` (`dumps_stacks`: it logs them on `STACKS_SIGNAL`)."""
        log_path = self.directory / f"{name}.{self._spawned}.jsonl"
        self._spawned += 1
        with log_path.open("wb") as log, (self.directory / f"{name}.err").open("ab") as err:
            stdout, stderr = (subprocess.DEVNULL, log) if log_stderr else (log, err)
            child_env = {**_child_env(), **(env or {})}
            process = subprocess.Popen(
                command,
                stdout=stdout,
                stderr=stderr,
                env=child_env,
                preexec_fn=die_with_parent(),  # a run killed hard leaves no member behind
            )
        member = MemberProcess(name, process, log_path, dumps_stacks)
        self.members[name] = member
        return member

    def running(self) -> list[str]:
        """Names of the members whose process still runs."""
        return [n for n, m in self.members.items() if m.process.poll() is None]

    def _close(self) -> None:
        self.close()

    def close(self) -> None:
        """Kill (SIGCONT first, in case one is stopped) and reap every member."""
        for member in self.members.values():
            member.send(signal.SIGCONT)
            member.send(signal.SIGKILL)
        for member in self.members.values():
            member.process.wait()


def _child_env() -> dict[str, str]:
    # The directory holding the `framework` package: a checkout, or site-packages.
    root = str(Path(__file__).resolve().parents[1])
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{path}" if path else root}
