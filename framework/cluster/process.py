"""One server JVM: start, stop, kill, and find out whether it still runs."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from framework.kernel.errors import ClusterError, PortInUseError
from framework.kernel.lifecycle import die_with_parent

__all__ = [
    "PORT_ATTEMPTS",
    "ServerProcess",
    "check_started",
    "free_ports",
    "is_zombie",
    "java",
    "pid_alive",
    "port_taken",
    "retry_taken_ports",
    "running_state",
    "stop_recorded",
    "stop_together",
    "wait_until",
    "write_state",
]

PORT_ATTEMPTS = 3
"""How often servers start on new ports when one finds its port taken (since it was chosen)."""
_log = structlog.get_logger("sessionizer.cluster")


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct TCP ports on `host` (default loopback) that nothing listens on right now."""
    # All sockets stay bound until every port is chosen, so no port is handed out twice.
    with contextlib.ExitStack() as stack:
        sockets = [
            stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            for _ in range(count)
        ]
        for sock in sockets:
            sock.bind((host, 0))
        return [int(sock.getsockname()[1]) for sock in sockets]


def port_taken(log: str) -> bool:
    """Whether a server's log says it could not bind its port (taken since it was chosen)."""
    return "Address already in use" in log


def wait_until(
    condition: Callable[[], bool], timeout: float, what: str, interval: float = 0.1
) -> None:
    """Poll `condition` until it holds, or raise `ClusterError` naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return
        if time.monotonic() >= deadline:
            raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def pid_alive(pid: int, marker: str | None = None) -> bool:
    """Whether `pid` runs (and, given `marker`, its command line contains it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if marker is None:
        return True
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return False
    return marker.encode() in cmdline and not is_zombie(pid)


def is_zombie(pid: int) -> bool:
    """Whether `pid` has exited and waits to be reaped (also when /proc has no readable entry)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


@dataclass
class ServerProcess:
    """A named server started from a command line, logging to one file."""

    name: str
    command: Sequence[str]
    log_path: Path
    die_with_parent: bool = True
    pid: int | None = None
    _popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the process (no-op when it already runs)."""
        if self.running():
            return
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self._popen = subprocess.Popen(
                list(self.command),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=die_with_parent() if self.die_with_parent else None,
            )
        self.pid = self._popen.pid

    def running(self) -> bool:
        """Whether the process is alive."""
        if self._popen is not None:
            return self._popen.poll() is None
        return self.pid is not None and pid_alive(self.pid, marker=str(self.log_path.parent))

    def kill(self) -> None:
        """SIGKILL, as a crash would; waits until the process is gone."""
        self._signal(signal.SIGKILL)
        self._reap(timeout=30)

    def terminate(self) -> None:
        """SIGTERM without waiting."""
        self._signal(signal.SIGTERM)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM and wait; SIGKILL if it has not exited within `timeout`."""
        self._signal(signal.SIGTERM)
        if not self._reap(timeout=timeout):
            self.kill()

    def pause(self) -> None:
        """SIGSTOP: the process stays but stops answering."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after `pause`."""
        self._signal(signal.SIGCONT)

    def log_text(self) -> str:
        """The server's whole log ('' if it has none yet)."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the server's log, for error messages."""
        text = self.log_text()
        return "\n".join(text.splitlines()[-lines:]) if text else "(no log)"

    def _signal(self, signum: int) -> None:
        if self.pid is None or not self.running():
            return
        # It may exit between the check and the signal: the goal is met then.
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signum)

    def _reap(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.running():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        if self._popen is not None:
            self._popen.wait()
        return True


def stop_together(processes: Sequence[ServerProcess], timeout: float = 20) -> None:
    """Signal every process first, then wait for each: a group shuts down together.

    A quorum (or a Spark master's workers) stopped one by one would have each
    member wait for peers that are already gone.
    """
    for process in processes:
        process.terminate()
    for process in processes:
        process.stop(timeout=timeout)


def java() -> str:
    """The `java` the servers run with: JAVA_HOME's, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found or not Path(found).exists():
        raise ClusterError("no java on PATH (or JAVA_HOME): install Java 17 or newer")
    return found


def check_started(process: ServerProcess) -> None:
    """Raise if `process` exited while starting: `PortInUseError` when its port was taken."""
    if process.running():
        return
    error = PortInUseError if port_taken(process.log_text()) else ClusterError
    raise error(
        f"{process.name} exited while starting; its log ({process.log_path}) ends with:\n"
        + process.log_tail()
    )


def write_state(path: Path, processes: Mapping[str, ServerProcess], **fields: Any) -> None:
    """Write the state file at `path`: `fields`, then each server's name, pid and directory,
    so that another process finds them (`running_state`) and stops them (`stop_recorded`)."""
    servers = [
        {"name": name, "pid": p.pid, "directory": str(p.log_path.parent)}
        for name, p in processes.items()
    ]
    path.write_text(json.dumps({**fields, "servers": servers}, indent=2) + "\n")


def running_state(path: Path) -> dict[str, Any] | None:
    """The state file at `path` if every server it records still runs (else None)."""
    state = _read_state(path)
    if state is None:
        return None
    alive = all(pid_alive(s["pid"], marker=s["directory"]) for s in state["servers"])
    return state if alive else None


def _read_state(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text()) if path.exists() else None


def stop_recorded(path: Path) -> list[str]:
    """Stop the servers the state file at `path` records (last first), remove it; their names."""
    state = _read_state(path)
    if state is None:
        return []
    stopped = []
    for server in reversed(state["servers"]):
        process = ServerProcess(
            server["name"], [], Path(server["directory"]) / "server.log", pid=server["pid"]
        )
        if process.running():
            process.stop(timeout=20)
            stopped.append(server["name"])
    path.unlink(missing_ok=True)
    return stopped


def retry_taken_ports(
    attempt: Callable[[], None], event: str, again: Callable[[], None] | None = None
) -> None:
    """Run `attempt` until no server finds its port taken, at most PORT_ATTEMPTS times.

    Each failure is logged as `event`; `again` (if given) runs before the next attempt.
    """
    for number in range(1, PORT_ATTEMPTS + 1):
        try:
            attempt()
            return
        except PortInUseError as exc:
            if number == PORT_ATTEMPTS:
                raise
            _log.warning(event, attempt=number, error=str(exc).splitlines()[0])
            if again is not None:
                again()
