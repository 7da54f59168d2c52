"""The command line as a Unix tool: --version, `python -m sessionizer`, `| head`, log flags."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

import framework.cli as cli
import framework.commands.sessions as sessions_command

ROOT = Path(__file__).resolve().parents[2]
SESSIONIZER = str(Path(sys.executable).with_name("sessionizer"))


def _run(*argv: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv), capture_output=True, text=True, cwd=ROOT, timeout=120, **kwargs
    )


def test_version_comes_from_the_installed_metadata() -> None:
    result = _run(SESSIONIZER, "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"sessionizer {version('sessionizer')}"


def test_python_dash_m_sessionizer_is_the_sessionizer_command() -> None:
    for argv in (["--version"], ["--help"], ["node", "--help"]):
        as_module = _run(sys.executable, "-m", "sessionizer", *argv)
        as_script = _run(SESSIONIZER, *argv)
        assert as_module.returncode == as_script.returncode == 0, as_module.stderr
        assert as_module.stdout == as_script.stdout
    # An error's exit code and message come through as well.
    failed = _run(sys.executable, "-m", "sessionizer", "node")
    assert failed.returncode == 2
    assert "sessionizer node: error: the following arguments are required" in failed.stderr


# A child whose `sessions` reads 200,000 sessions from a fake instead of Kafka.
_SESSIONS_CHILD = textwrap.dedent(
    """
    import sys
    import framework.commands.sessions as command
    from framework.cli import main

    session = {"session_id": "s", "key": "k", "fragments": 1, "first_ts": 0, "last_ts": 1000}
    command.require_streams = lambda connection: 1
    command.read_sessions = lambda *args, **kwargs: [session] * 200_000
    sys.exit(main(["sessions", *sys.argv[1:], "--zk", "z:1", "--bootstrap", "b:1"]))
    """
)


@pytest.mark.parametrize("flags", [["--json"], []])
def test_a_reader_that_goes_away_ends_the_command_quietly(flags: list[str]) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _SESSIONS_CHILD, *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    assert child.stdout is not None and child.stderr is not None
    first = child.stdout.readline()  # what `| head -1` reads, then it exits
    child.stdout.close()
    code = child.wait(timeout=120)
    stderr = child.stderr.read().decode()
    child.stderr.close()
    assert first.startswith(b'{"first_ts": 0' if flags else b"s ")
    assert code == 141, stderr  # 128 + SIGPIPE, as `cat` gets (framework.cli.EXIT_BROKEN_PIPE)
    assert stderr == ""


def test_print_sessions_lets_a_broken_pipe_reach_main(tmp_path: Path) -> None:
    """The unit under `main`: printing to a pipe whose reader is gone raises BrokenPipeError."""
    import os

    read_end, write_end = os.pipe()
    os.close(read_end)
    with os.fdopen(write_end, "w") as out, pytest.raises(BrokenPipeError):
        sessions_command.print_sessions([{"session_id": "s"}] * 10_000, as_json=True, out=out)


def test_the_log_flags_and_variables_reach_configure_logging(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[tuple[str, str | None]] = []
    monkeypatch.setattr(cli, "configure_logging", lambda level, fmt: seen.append((level, fmt)))
    monkeypatch.delenv("SESSIONIZER_LOG_FORMAT", raising=False)
    monkeypatch.delenv("SESSIONIZER_LOG_LEVEL", raising=False)
    down = ["cluster", "down", "--dir", str(tmp_path)]
    cli.main(down)
    cli.main([*down, "--log-format", "json", "--log-level", "debug"])
    monkeypatch.setenv("SESSIONIZER_LOG_FORMAT", "console")
    monkeypatch.setenv("SESSIONIZER_LOG_LEVEL", "warning")
    cli.main(down)
    assert seen == [("info", None), ("debug", "json"), ("warning", "console")]


def test_cluster_down_where_no_cluster_was_started_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Logging is left alone: configured here, it would write to this test's captured stderr.
    monkeypatch.setattr(cli, "configure_logging", lambda level, fmt: None)
    assert cli.main(["cluster", "down", "--dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"no cluster was started in {tmp_path}" in err
    assert "SESSIONIZER_CLUSTER_DIR" in err


# A child whose `sessions` read meets an unreachable Kafka: the client logs its retries,
# then gives up, as kafka-python does against a wrong --bootstrap.
_UNREACHABLE_CHILD = textwrap.dedent(
    """
    import logging, sys
    import framework.commands.sessions as command
    from framework.cli import main
    from framework.kafka.errors import ClientError

    def read(*args, **kwargs):
        for _ in range(3):
            logging.getLogger("kafka.net.manager").warning("Bootstrap bootstrap-0 not ready")
        raise ClientError("Unable to bootstrap from b:1", client_class="KafkaTimeoutError")

    command.require_streams = lambda connection: 1
    command.read_sessions = read
    sys.exit(main(["sessions", *sys.argv[1:], "--zk", "z:1", "--bootstrap", "b:1"]))
    """
)


@pytest.mark.parametrize("level", ["info", "debug"])
def test_a_one_shot_command_s_error_is_one_line_without_the_client_s_retries(level: str) -> None:
    result = _run(sys.executable, "-c", _UNREACHABLE_CHILD, "--log-level", level)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("sessionizer sessions: error: ")]
    assert len(errors) == 1 and "the cluster did not answer" in errors[0], lines
    if level == "info":
        assert lines == errors
    else:  # debug shows what the client tried
        assert any("not ready" in line for line in lines), lines
