"""Misconfiguration ends a command with a clear message and exit 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
SESSIONIZER = str(Path(sys.executable).with_name("sessionizer"))
UNREACHABLE = "127.0.0.1:1"  # nothing listens on port 1


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["node", "--processor", "sessionizer.examples.weblog:WebSessions", "--id", "x"],
         f"cannot reach Kafka at {UNREACHABLE}"),
        (["node", "--processor", "no.such.module:Thing"], "cannot import processor module"),
        (["node", "--processor", "sessionizer.examples.weblog:Nope"], "has no class 'Nope'"),
        (["sessions"], "the cluster did not answer"),
        (["generate", "--sessions", "1", "--watermark-interval", "0"],
         "--watermark-interval must be > 0 seconds"),
    ],
)  # fmt: skip
def test_a_bad_setting_is_one_clear_line(
    zk_hosts: str, app: str, argv: list[str], message: str
) -> None:
    result = subprocess.run(
        [SESSIONIZER, *argv, "--zk", zk_hosts, "--bootstrap", UNREACHABLE, "--app", app],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr[-2000:]
    assert message in result.stderr
    assert "Traceback" not in result.stderr
