"""Misconfiguration ends a command with a clear message and exit 2, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from framework.kernel.paths import AppPaths
from framework.kernel.zookeeper import zookeeper_client
from framework.testing.cli import DATA, cli_json
from router.naming import stream_name
from router.registry import register_streams

pytestmark = pytest.mark.integration
SESSIONIZER = str(Path(sys.executable).with_name("sessionizer"))
UNREACHABLE = "127.0.0.1:1"  # nothing listens on port 1
NO_STREAMS = "has no streams; run `sessionizer streams create --count N`"


def _sessionizer(
    *argv: str, zk: str, bootstrap: str, app: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SESSIONIZER, *argv, "--zk", zk, "--bootstrap", bootstrap, "--app", app],
        capture_output=True, text=True, timeout=180, env={**os.environ, **(env or {})},
    )  # fmt: skip


def _one_clear_line(result: subprocess.CompletedProcess[str], message: str) -> None:
    assert result.returncode == 2, result.stderr[-2000:]
    assert message in result.stderr, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1 and len(errors[0]) < 600, result.stderr[-2000:]


@pytest.fixture
def registered(zk_hosts: str, app: str) -> str:
    """An app with 2 streams registered in ZooKeeper (no topics: Kafka is not needed)."""
    with zookeeper_client(zk_hosts) as client:
        paths = AppPaths(app)
        register_streams(client, paths.active_streams, app, [stream_name(app, i) for i in (0, 1)])
    return app


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["node", "--processor", "sessionizer.examples.weblog:WebSessions", "--id", "x"],
         f"cannot reach Kafka at {UNREACHABLE}"),
        (["node", "--processor", "no.such.module:Thing"], "cannot import processor module"),
        (["node", "--processor", "sessionizer.examples.weblog:Nope"], "has no class 'Nope'"),
        (["node", "--processor", "sessionizer.examples.weblog:WebSessions",
          "--session-timeout", "100000"],
         "--session-timeout 100000 s: ZooKeeper at"),
        (["sessions"], "the cluster did not answer"),
        (["generate", "--sessions", "1", "--watermark-interval", "0"],
         "--watermark-interval must be > 0 seconds"),
        (["generate", "--sessions", "1", "--max-lead", "soon"],
         "--max-lead must be > 0 seconds or 'none', got 'soon'"),
        (["generate", "--sessions", "1", "--max-ahead", "-5"],
         "--max-ahead must be > 0 seconds or 'none' or 'topics', got '-5'"),
    ],
)  # fmt: skip
def test_a_bad_setting_is_one_clear_line(
    zk_hosts: str, registered: str, argv: list[str], message: str
) -> None:
    result = _sessionizer(*argv, zk=zk_hosts, bootstrap=UNREACHABLE, app=registered)
    _one_clear_line(result, message)


@pytest.mark.parametrize(
    "argv",
    [
        ["sessions", "--json"],
        ["node", "--processor", "sessionizer.examples.weblog:WebSessions", "--id", "x"],
        ["status"],
        ["generate", "--sessions", "1"],
    ],
    ids=["sessions", "node", "status", "generate"],
)
def test_an_app_without_streams_is_refused_by_every_command(
    zk_hosts: str, kafka_bootstrap: str, app: str, argv: list[str]
) -> None:
    result = _sessionizer(*argv, zk=zk_hosts, bootstrap=kafka_bootstrap, app=app)
    _one_clear_line(result, f"app {app!r} {NO_STREAMS}")


def test_a_processor_with_a_syntax_error_names_file_and_line(
    zk_hosts: str, registered: str, tmp_path: Path
) -> None:
    (tmp_path / "my_sessions.py").write_text("class Visits(:\n    pass\n")
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)
    result = _sessionizer(
        "node", "--processor", "my_sessions:Visits",
        zk=zk_hosts, bootstrap=UNREACHABLE, app=registered, env={"PYTHONPATH": path},
    )  # fmt: skip
    _one_clear_line(result, f"has a syntax error at {tmp_path / 'my_sessions.py'}:1")


def test_replication_beyond_the_brokers_or_the_topics_is_one_line(
    zk_hosts: str, kafka_bootstrap: str, app: str
) -> None:
    servers = {"zk": zk_hosts, "bootstrap": kafka_bootstrap, "app": app}
    too_many = _sessionizer("streams", "create", "--count", "2", "--replication", "3", **servers)
    _one_clear_line(too_many, "with replication factor 3: the cluster has 1 broker(s)")
    created = _sessionizer("streams", "create", "--count", "2", **servers)
    assert created.returncode == 0, created.stderr
    assert len(created.stdout.splitlines()) == 1  # the result, once
    assert "topics_ready" not in created.stderr  # and not a second time in the log
    other = _sessionizer("streams", "create", "--count", "2", "--replication", "3", **servers)
    _one_clear_line(other, "topic(s) with replication factor 1, not 3")


def test_every_line_rejected_suggests_the_format(
    zk_hosts: str, kafka_bootstrap: str, app: str
) -> None:
    cli_json("streams", "create", "--count", "2", zk=zk_hosts, bootstrap=kafka_bootstrap, app=app)
    result = _sessionizer(
        "produce", str(DATA / "apache_logs"), "--format", "sshd", "--end-of-input",
        zk=zk_hosts, bootstrap=kafka_bootstrap, app=app,
    )  # fmt: skip
    _one_clear_line(result, "parsed as sshd (unparseable=10,000); the first lines parse with "
                    "--format apache")  # fmt: skip
    # Not a line per rejected line: one summary per reason (and the producer's own lines).
    assert '"line_rejected"' not in result.stderr
    assert result.stderr.count('"lines_rejected"') == 1
    assert len(result.stderr.splitlines()) <= 5
