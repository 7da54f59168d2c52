"""The README's first command, `sessionizer demo`, runs to its verification line and cleans up."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from framework.testing.cli import DATA
from framework.testing.docs import README

pytestmark = pytest.mark.integration
SESSIONIZER = str(Path(sys.executable).with_name("sessionizer"))
VERIFIED = re.compile(
    r"^verified: fragments sent (\d+), sessions found (\d+), expected (\d+), "
    r"lost (\d+), duplicates (\d+)$",
    re.MULTILINE,
)
STEP = re.compile(r"^\[\d/\d\] \S+", re.MULTILINE)


def _leftovers(directory: Path) -> list[str]:
    """Processes whose command line mentions the demo's directory (servers, nodes)."""
    out = subprocess.run(["ps", "-eo", "pid=,args="], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if str(directory) in line]


# The generated variant is opt-in (`-m slow`): CI runs the default demo, the real log.
@pytest.mark.parametrize(
    "source", [pytest.param("generated", marks=pytest.mark.slow), "apache_logs"]
)
def test_demo_verifies_its_output_and_leaves_nothing_running(tmp_path: Path, source: str) -> None:
    args = ["--sessions", "400"]
    if source == "apache_logs":
        args = ["--log", str(DATA / "apache_logs"), "--format", "apache"]
    directory = tmp_path / "demo"
    result = subprocess.run(
        [SESSIONIZER, "demo", "--dir", str(directory), "--app", "demo", *args],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    match = VERIFIED.search(result.stdout)
    assert match, result.stdout[-3000:]
    sent, found, expected, lost, _duplicates = map(int, match.groups())
    assert lost == 0 and found == expected > 0 and sent > 0
    if source == "apache_logs":
        assert sent == 9999
    assert "kill -9 n2" in result.stdout
    assert f"total sessions: {found}" in result.stdout  # Spark's count agrees
    chart = directory / "aggregates" / "sessions_per_hour.png"
    assert chart.read_bytes().startswith(b"\x89PNG") and chart.stat().st_size > 10_000
    assert _leftovers(directory) == []
    # The README's abridged output shows the steps as the demo prints them...
    assert set(STEP.findall(README.read_text())) <= set(STEP.findall(result.stdout))
    # ...and no warning of a client that started before the cluster could serve it.
    assert '"logger": "librdkafka"' not in result.stdout + result.stderr
