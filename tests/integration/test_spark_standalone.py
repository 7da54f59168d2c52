"""`aggregate --once` on a real Spark standalone cluster (a master and 2 workers, own JVMs).

The cluster runs from the installed PySpark's jars (`framework.cluster.spark`).
The figures submitted to it equal those of a `local[2]` run and the pure-Python
reference; the master's JSON status shows the application finished with a core
of each worker, each worker's JSON lists an executor of it, and each executor's
log shows it fetched the Kafka source jar from the driver and ran tasks.  Every
JVM is stopped at the end, also on failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from framework.cluster.process import pid_alive, wait_until
from framework.cluster.spark import SPARK_STATE_FILE, SparkStandalone, fetch_json
from framework.testing.aggregate import reference, replays, traffic, write
from framework.testing.cli import cli

pytestmark = pytest.mark.integration
SESSIONIZER = str(Path(sys.executable).with_name("sessionizer"))
APP_NAME = "sessionizer-aggregate"  # SparkSettings.app_name


@pytest.fixture
def standalone(tmp_path: Path) -> Iterator[SparkStandalone]:
    """A master and 2 workers (1 core, 1g each); all stopped at the end, also on failure."""
    with SparkStandalone(tmp_path / "spark", workers=2) as cluster:
        yield cluster


@pytest.fixture
def topic(kafka_bootstrap: str, app: str) -> str:
    """`<app>.sessions` with 2 partitions, so that each executor has one to read."""
    name = f"{app}.sessions"
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        admin.create_topics([NewTopic(name, num_partitions=2, replication_factor=1)])
    finally:
        admin.close()
    return name


def finished_application(cluster: SparkStandalone) -> dict[str, Any]:
    """The master's one completed application (the aggregation), once it is listed."""
    apps: list[dict[str, Any]] = []

    def listed() -> bool:
        apps[:] = [a for a in cluster.master_status()["completedapps"] if a["name"] == APP_NAME]
        return bool(apps)

    wait_until(listed, 30, "the master to list the finished application", interval=0.5)
    assert len(apps) == 1, apps
    return apps[0]


def workers_with_executors_of(cluster: SparkStandalone, app_id: str) -> set[str]:
    """Ids of the workers whose JSON status lists an executor of `app_id`."""
    return {
        worker["id"]
        for worker in cluster.worker_statuses()
        for executor in worker["executors"] + worker["finishedexecutors"]
        if executor["appid"] == app_id
    }


def executor_log(work: Path, app_id: str) -> str:
    """The stderr of every executor of `app_id` on one worker."""
    return "".join(path.read_text(errors="replace") for path in work.glob(f"{app_id}/*/stderr"))


# Opt-in (`-m slow`, ~1.5 min): CI keeps the standalone cluster's start and stop below,
# and the aggregation's figures in local mode (test_aggregate.py).
@pytest.mark.slow
def test_once_on_the_standalone_master_equals_local_and_uses_both_workers(
    standalone: SparkStandalone,
    zk_hosts: str,
    kafka_bootstrap: str,
    app: str,
    topic: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sessions = traffic(11, 400, prefix="w")
    records = [*sessions, *replays(sessions, 6)]
    write(kafka_bootstrap, topic, records)
    monkeypatch.setenv("SESSIONIZER_SPARK_MASTER", standalone.master_url)
    monkeypatch.setenv("SPARK_EXECUTOR_MEMORY", "512m")  # read by SparkContext; workers have 1g
    connection = {"zk": zk_hosts, "bootstrap": kafka_bootstrap, "app": app}

    # No --master: SESSIONIZER_SPARK_MASTER chooses the standalone master.
    out = ("--out", str(tmp_path / "standalone"), "--json")
    code, stdout, stderr = cli("aggregate", "--once", *out, **connection)
    assert code == 0, stderr
    assert f"on {standalone.master_url})" in stderr
    on_cluster = json.loads(stdout.strip().splitlines()[-1])

    out = ("--out", str(tmp_path / "local"), "--json")
    code, stdout, stderr = cli("aggregate", "--once", "--master", "local[2]", *out, **connection)
    assert code == 0, stderr
    assert "on local[2])" in stderr
    on_local = json.loads(stdout.strip().splitlines()[-1])

    assert on_cluster == on_local == json.loads(json.dumps(reference(records).to_json()))
    assert sum(row["sessions"] for row in on_cluster["rows"]) == len(sessions)

    application = finished_application(standalone)
    assert application["state"] == "FINISHED"
    assert application["cores"] == 2  # one core of each worker
    assert application["memoryperexecutor"] == 512
    alive = {w["id"] for w in standalone.master_status()["workers"] if w["state"] == "ALIVE"}
    assert len(alive) == 2
    wait_until(
        lambda: workers_with_executors_of(standalone, application["id"]) == alive,
        30,
        "both workers to list an executor of the application",
        interval=0.5,
    )
    for work in standalone.worker_directories():
        log = executor_log(work, application["id"])
        assert "spark-sql-kafka-0-10" in log, f"no Kafka source jar fetched under {work}"
        assert "Finished task" in log, f"no task ran on the executor under {work}"


def test_cluster_up_with_spark_workers_exports_the_master_and_down_stops_it(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "cluster"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SESSIONIZER_")}
    up = [SESSIONIZER, "cluster", "up", "--dir", str(directory), "--spark-workers", "1"]
    down = [SESSIONIZER, "cluster", "down", "--dir", str(directory)]
    daemons: list[tuple[int, str]] = []
    try:
        result = subprocess.run(up, capture_output=True, text=True, env=env, timeout=400)
        assert result.returncode == 0, result.stderr
        exports = dict(
            line.removeprefix("export ").split("=", 1) for line in result.stdout.splitlines()
        )
        master = exports["SESSIONIZER_SPARK_MASTER"]
        assert master.startswith("spark://127.0.0.1:")
        state = json.loads((directory / SPARK_STATE_FILE).read_text())
        assert state["master_url"] == master
        status = fetch_json(f"{state['webui_url']}/json/")
        assert status["url"] == master and status["aliveworkers"] == 1
        daemons = [(s["pid"], s["directory"]) for s in state["servers"]]
        assert len(daemons) == 2 and all(pid_alive(pid, marker) for pid, marker in daemons)

        again = subprocess.run(up, capture_output=True, text=True, env=env, timeout=120)
        assert again.returncode == 0, again.stderr
        assert f"export SESSIONIZER_SPARK_MASTER={master}" in again.stdout.splitlines()
    finally:
        stopped = subprocess.run(down, capture_output=True, text=True, env=env, timeout=180)
    assert stopped.returncode == 0, stopped.stderr
    assert "spark-master" in stopped.stderr and "spark-worker1" in stopped.stderr
    assert not any(pid_alive(pid, marker) for pid, marker in daemons)
    assert not (directory / SPARK_STATE_FILE).exists()
