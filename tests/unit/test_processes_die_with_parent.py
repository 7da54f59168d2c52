"""A run killed hard (kill -9) leaves none of the processes it started behind.

`ProcessGroup` (the demo's nodes, the tests' and the benchmarks' nodes and members)
kills its members when it closes; when the process holding it dies without closing
it, the kernel does (`framework.kernel.lifecycle.die_with_parent`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from framework.cluster import wait_until

ROOT = Path(__file__).resolve().parents[2]

# Both processes wait for a signal: they run until killed.
PARENT = """
import signal, sys
from pathlib import Path
from framework.processes import ProcessGroup

group = ProcessGroup(Path(sys.argv[1]))
member = group.spawn("waiter", [sys.executable, "-c", "import signal; signal.pause()"])
print(member.process.pid, flush=True)
signal.pause()
"""


def _running(pid: int) -> bool:
    """Whether `pid` runs (an exited process waiting to be reaped does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_the_members_of_a_group_die_with_the_process_that_started_them(tmp_path: Path) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(tmp_path)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert parent.stdout is not None
    member = int(parent.stdout.readline())
    try:
        assert _running(member)
        parent.send_signal(signal.SIGKILL)  # no `close`, no `finally`: only the kernel acts
        parent.wait(timeout=30)
        wait_until(lambda: not _running(member), 30, f"member {member} to die with its parent")
    finally:
        parent.kill()
        parent.wait()
        if _running(member):
            os.kill(member, signal.SIGKILL)
