"""The README's "Running against your cluster" block, run against a secured local cluster.

The block's shell commands run as written (with the secured cluster's address,
credentials and CA in place of the example's), then the node it started is
checked: `/metrics` parses with prometheus_client's parser and shows the node
owning every stream the block created, and its probes answer 200.
"""

from __future__ import annotations

import re
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from framework.cluster import LocalCluster
from framework.cluster.process import free_ports
from framework.testing.members import wait_for
from framework.testing.nodes import SESSIONIZER

pytestmark = pytest.mark.integration
README = Path(__file__).resolve().parents[2] / "README.md"


def _block() -> str:
    section = README.read_text().split("## Running against your cluster", 1)[1]
    return re.findall(r"```sh\n(.*?)```", section.split("\n## ", 1)[0], flags=re.DOTALL)[0]


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError:
        return 0, ""


def _script(block: str, cluster: LocalCluster, bin_dir: Path, port: int) -> str:
    """The block with this cluster's settings, and the node left running in the background."""
    properties = "\n".join(f"{k}={v}" for k, v in cluster.client_properties.items())
    script = re.sub(r"<<'PROPERTIES'\n.*?\nPROPERTIES", f"<<'PROPERTIES'\n{properties}\nPROPERTIES",
                    block, flags=re.DOTALL)  # fmt: skip
    script = script.replace("zk1:2181,zk2:2181,zk3:2181", cluster.zk_connect)
    script = script.replace("kafka1:9093", cluster.bootstrap)
    script = script.replace("digest:sessionizer:change-me", cluster.zk_auth or "")
    script = script.replace("--replication 3", "--replication 1")
    # The node goes on in the background: its output to a file, not to the pipes we wait on.
    script = script.replace("--metrics-port 9400 &", f"--metrics-port {port} > node.log 2>&1 &")
    script = script.replace("9400", str(port))
    # The block's `curl` runs right after the node starts: wait for the node to be ready first.
    ready = f"until curl -sf localhost:{port}/readyz >/dev/null; do sleep 0.2; done\n"
    script = script.replace("curl -s localhost", ready + "curl -s localhost", 1)
    return (
        f"set -e\nexport PATH={bin_dir}:$PATH SESSIONIZER_APP=readme\n{script}echo $! > node.pid\n"
    )


def test_the_readme_block_runs_against_a_secured_cluster(
    local_cluster: Callable[..., LocalCluster], tmp_path: Path
) -> None:
    cluster = local_cluster(secure=True)
    (port,) = free_ports(1)
    script = _script(_block(), cluster, Path(SESSIONIZER).parent, port)
    node_pid: int | None = None
    try:
        result = subprocess.run(["bash", "-c", script], cwd=tmp_path, capture_output=True,
                                text=True, timeout=300)  # fmt: skip
        pid_file = tmp_path / "node.pid"
        node_pid = int(pid_file.read_text()) if pid_file.exists() else None
        assert result.returncode == 0, result.stderr[-3000:]
        assert '"app": "readme"' in result.stdout  # status --json, its first 300 bytes
        assert "ok: coordinator" in result.stdout and "sessionizer_streams_owned" in result.stdout
        password = cluster.client_properties["sasl.password"]
        assert password not in result.stdout + result.stderr
        metrics = f"http://127.0.0.1:{port}"

        def owned() -> float:
            scrape = text_string_to_metric_families(_get(metrics + "/metrics")[1])
            families = {family.name: family for family in scrape}
            return float(families["sessionizer_streams_owned"].samples[0].value)

        # The one node takes every stream the block created (the gauge is republished each s).
        wait_for(lambda: owned() == 64, 60, "the node to own the 64 streams")
        assert _get(metrics + "/readyz")[0] == 200 and _get(metrics + "/healthz")[0] == 200
    finally:
        if node_pid is not None:
            subprocess.run(["kill", "-TERM", str(node_pid)], check=False)
