"""Secrets given on the command line never show in the process title that `ps` reads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from framework.kernel.client_settings import hide_secret_arguments
from framework.testing.members import wait_for

SESSIONIZER = str(Path(sys.executable).with_name("sessionizer"))


def test_secret_flag_values_are_masked() -> None:
    assert hide_secret_arguments(["x", "--zk-auth", "digest:u:p", "--app", "a"]) == [
        "x", "--zk-auth", "***", "--app", "a",
    ]  # fmt: skip
    assert hide_secret_arguments(["x", "--zk-auth=digest:u:p"]) == ["x", "--zk-auth=***"]
    assert hide_secret_arguments(["x", "--app", "a"]) is None


def test_a_running_command_does_not_show_its_zk_auth_in_ps() -> None:
    # Nothing listens on port 1: the command waits for ZooKeeper long enough to be looked at.
    command = [SESSIONIZER, "status", "--zk", "127.0.0.1:1", "--bootstrap", "127.0.0.1:1",
               "--zk-auth", "digest:user:topsecret"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cmdline = Path(f"/proc/{process.pid}/cmdline")
    try:
        shown = wait_for(
            lambda: (text := cmdline.read_bytes().replace(b"\0", b" ")) and b"***" in text and text,
            30,
            "the masked process title",
        )
        assert b"topsecret" not in shown and b"--zk-auth ***" in shown
    finally:
        process.kill()
        process.wait(timeout=30)
