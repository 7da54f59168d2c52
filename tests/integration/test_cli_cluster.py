"""`eval "$(sessionizer cluster up)"` works, and `cluster down` leaves nothing running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from framework.cluster.process import pid_alive
from framework.cluster.zookeeper_server import zookeeper_mode

pytestmark = pytest.mark.integration
SESSIONIZER = str(Path(sys.executable).with_name("sessionizer"))


def test_cluster_up_prints_exports_for_eval_and_down_stops_it(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    script = (
        f'eval "$({SESSIONIZER} cluster up --dir {directory})" && '
        'echo "ZK=$SESSIONIZER_ZK" && echo "BOOTSTRAP=$SESSIONIZER_BOOTSTRAP" && '
        'echo "DIR=$SESSIONIZER_CLUSTER_DIR"'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SESSIONIZER_")}
    servers: list[tuple[int, str]] = []
    try:
        result = subprocess.run(
            ["bash", "-c", script], capture_output=True, text=True, env=env, timeout=300
        )
        assert result.returncode == 0, result.stderr
        values = dict(line.split("=", 1) for line in result.stdout.splitlines())
        assert zookeeper_mode(values["ZK"]) == "standalone"
        assert values["BOOTSTRAP"].startswith("127.0.0.1:")
        assert values["DIR"] == str(directory.resolve())
        state = json.loads((directory / "cluster.json").read_text())
        # The marker makes a zombie (exited, not yet reaped by init) count as gone.
        servers = [(s["pid"], s["directory"]) for s in state["servers"]]
        assert all(pid_alive(pid, marker) for pid, marker in servers)
        # Without --dir or the exported variable, `down` looks in ./.local-cluster,
        # where no cluster was started: an error, not "stopped: nothing was running".
        elsewhere = subprocess.run(
            [SESSIONIZER, "cluster", "down"],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
        )  # fmt: skip
        assert elsewhere.returncode == 1, elsewhere.stderr
        assert elsewhere.stderr.startswith(
            "sessionizer cluster down: error: no cluster was started"
        )
        assert elsewhere.stderr.count("\n") == 1
        assert all(pid_alive(pid, marker) for pid, marker in servers)
    finally:
        # No --dir: the variable `cluster up` exported (checked above) names the directory.
        down = subprocess.run(
            [SESSIONIZER, "cluster", "down"],
            capture_output=True, text=True, cwd=tmp_path, timeout=120,
            env={**env, "SESSIONIZER_CLUSTER_DIR": str(directory.resolve())},
        )  # fmt: skip
    assert down.returncode == 0, down.stderr
    assert not any(pid_alive(pid, marker) for pid, marker in servers)
    again = subprocess.run(
        [SESSIONIZER, "cluster", "down", "--dir", str(tmp_path / "never")],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert again.returncode == 1 and "no cluster was started in" in again.stderr
