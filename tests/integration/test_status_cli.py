"""`sessionizer status` against real servers: exit codes when a server cannot be read, --watch.

Kafka "down" is a bootstrap address nothing listens on, for an app whose streams
exist (ZooKeeper answers): what a dead broker looks like to a client that starts.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from framework.testing.cli import cli_json

pytestmark = pytest.mark.integration
SESSIONIZER = str(Path(sys.executable).with_name("sessionizer"))
UNREACHABLE = "127.0.0.1:1"  # nothing listens on port 1
WIDE = ["STREAM", "OWNER", "LAG", "OPEN", "STATE", "EPOCH", "LOAD", "BUSY", "REPLAYED",
        "HANDOVER", "SAFE_OFFSET", "COMMITTED_OFFSET", "END_OFFSET", "IGNORED"]  # fmt: skip


def _start(*argv: str, zk: str, bootstrap: str, app: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [SESSIONIZER, "status", *argv, "--zk", zk, "--bootstrap", bootstrap, "--app", app],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _finish(process: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    try:
        out, err = process.communicate(timeout=120)
    finally:
        process.kill()
        process.wait()
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def _status(*argv: str, zk: str, bootstrap: str, app: str) -> subprocess.CompletedProcess[str]:
    return _finish(_start(*argv, zk=zk, bootstrap=bootstrap, app=app))


def _table(stdout: str) -> list[dict[str, str]]:
    """The stream rows of a status table, by column header (DEAD is there when it fits)."""
    lines = [line.split() for line in stdout.splitlines()]
    header = next(line for line in lines if line[:1] == ["STREAM"])
    return [dict(zip(header, line, strict=True)) for line in lines[lines.index(header) + 1 :]]


def _columns(stdout: str) -> list[str]:
    header = next(line.split() for line in stdout.splitlines() if line.startswith("STREAM"))
    return [column for column in header if column != "DEAD"]  # dead letters: another change


def _errors(stderr: str) -> list[str]:
    """The command's own lines on stderr (log lines are JSON when stderr is a pipe)."""
    return [line for line in stderr.splitlines() if not line.startswith("{")]


def test_status_reads_both_servers_and_fits_80_columns(
    zk_hosts: str, kafka_bootstrap: str, app: str
) -> None:
    conn = {"zk": zk_hosts, "bootstrap": kafka_bootstrap, "app": app}
    cli_json("streams", "create", "--count", "3", **conn)
    table = _status(**conn)
    assert table.returncode == 0, table.stderr
    assert max(len(line) for line in table.stdout.splitlines()) <= 80
    assert _columns(table.stdout) == ["STREAM", "OWNER", "LAG", "OPEN", "STATE"]
    first = _table(table.stdout)[0]
    assert [first[c] for c in ("STREAM", "OWNER", "LAG", "OPEN", "STATE")] == [
        f"{app}.stream.0000", "-", "0", "0", "unowned"
    ]  # fmt: skip
    wide = _status("-o", "wide", **conn)
    assert wide.returncode == 0 and _columns(wide.stdout) == WIDE
    shown = json.loads(_status("--json", **conn).stdout)
    assert shown["errors"] == [] and [row["lag"] for row in shown["streams"]] == [0, 0, 0]
    assert {"app", "consumers", "streams"} <= set(shown)


def test_status_exits_1_and_says_why_when_kafka_cannot_be_read(
    zk_hosts: str, kafka_bootstrap: str, app: str
) -> None:
    cli_json("streams", "create", "--count", "2", zk=zk_hosts, bootstrap=kafka_bootstrap, app=app)
    down = {"zk": zk_hosts, "bootstrap": UNREACHABLE, "app": app}
    # Side by side: each waits out status's Kafka timeout (10 s).
    running = [_start(**down), _start("--json", **down)]
    table, as_json = (_finish(process) for process in running)

    assert table.returncode == 1, table.stderr[-2000:]
    rows = [[row[c] for c in ("STREAM", "LAG", "OPEN", "STATE")] for row in _table(table.stdout)]
    assert rows == [[f"{app}.stream.{i:04d}", "-", "0", "unowned"] for i in range(2)]
    errors = _errors(table.stderr)
    assert len(errors) == 1 and errors[0].startswith("sessionizer status: error: cannot read Kafka")
    assert UNREACHABLE in errors[0] and "Traceback" not in table.stderr

    assert as_json.returncode == 1
    shown = json.loads(as_json.stdout)  # what ZooKeeper holds is printed all the same
    assert [row["end_offset"] for row in shown["streams"]] == [None, None]
    assert len(shown["errors"]) == 1 and "cannot read Kafka" in shown["errors"][0]


def test_status_exits_2_when_zookeeper_cannot_be_read(app: str) -> None:
    result = _status(zk=UNREACHABLE, bootstrap=UNREACHABLE, app=app)
    assert result.returncode == 2
    errors = _errors(result.stderr)
    assert len(errors) == 1 and "cannot reach ZooKeeper" in errors[0]


def test_watch_piped_separates_frames_under_a_timestamp(
    zk_hosts: str, kafka_bootstrap: str, app: str
) -> None:
    conn = {"zk": zk_hosts, "bootstrap": kafka_bootstrap, "app": app}
    cli_json("streams", "create", "--count", "1", **conn)
    argv = [SESSIONIZER, "status", "--watch", *(f"--{k}={v}" for k, v in conn.items())]
    watcher = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert watcher.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 60
        while sum(" UTC (every " in line for line in lines) < 2:  # two frames
            assert time.monotonic() < deadline, f"no second frame: {lines}"
            lines.append(watcher.stdout.readline().rstrip("\n"))
        watcher.send_signal(signal.SIGINT)
        assert watcher.wait(timeout=30) == 0
    finally:
        watcher.kill()
        watcher.wait()
    headers = [i for i, line in enumerate(lines) if " UTC (every " in line]
    assert all(lines[i - 1] == "" for i in headers)  # a blank line before each frame
    assert all(time.strptime(lines[i][:19], "%Y-%m-%d %H:%M:%S") for i in headers)
    assert not any("\x1b" in line for line in lines)  # no screen clearing into a pipe
    assert lines[headers[0] + 1].startswith(f"app {app}: ")

    as_json = subprocess.Popen(
        [*argv, "--json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert as_json.stdout is not None
        frames = [json.loads(as_json.stdout.readline()) for _ in range(2)]  # one a line
        as_json.send_signal(signal.SIGINT)
        assert as_json.wait(timeout=30) == 0
    finally:
        as_json.kill()
        as_json.wait()
    assert all(f["app"] == app and f["errors"] == [] for f in frames)
