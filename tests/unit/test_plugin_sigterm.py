"""A test run stopped by SIGTERM tears its fixtures down, as Ctrl-C does (the plugin's
`pytest_configure`): servers, nodes and network namespaces are fixtures' to remove."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from framework.cluster import wait_until

ROOT = Path(__file__).resolve().parents[2]

CONFTEST = 'pytest_plugins = ["framework.testing"]\n'
TESTS = """
import signal
from pathlib import Path

import pytest

HERE = Path(__file__).parent


@pytest.fixture
def cleaned() -> object:
    yield None
    (HERE / "torn-down").write_text("yes")


def test_runs_until_stopped(cleaned: object) -> None:
    (HERE / "running").write_text("yes")
    signal.pause()  # until the run is stopped
"""


def test_a_run_stopped_by_sigterm_tears_its_fixtures_down(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_stopped.py").write_text(TESTS)
    run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_stopped.py"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until(lambda: (tmp_path / "running").exists(), 60, "the test to start")
        run.send_signal(signal.SIGTERM)
        output, _ = run.communicate(timeout=60)
    finally:
        run.kill()
        run.wait()
    assert (tmp_path / "torn-down").exists(), output.decode(errors="replace")[-2000:]
    assert run.returncode == pytest.ExitCode.INTERRUPTED, output.decode(errors="replace")[-2000:]
