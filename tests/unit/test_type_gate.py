"""`make lint` runs mypy (strict, the project's settings): a type error fails it, hence CI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _mypy(path: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
               "--no-incremental", str(path)]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)


def test_the_lint_target_runs_mypy() -> None:
    lint = (ROOT / "Makefile").read_text().split("\nlint:", 1)[1].split("\n\n", 1)[0]
    assert "$(BIN)/mypy" in lint


def test_a_type_error_against_the_public_api_fails_the_check(tmp_path: Path) -> None:
    wrong = tmp_path / "wrong.py"
    wrong.write_text(
        "from framework import NodeConfig\n"
        "from framework.config import ConnectionConfig\n\n"
        "config = NodeConfig(ConnectionConfig('zk:1', 'kafka:1'), commit_interval='often')\n"
    )
    result = _mypy(wrong)
    assert result.returncode == 1, result.stdout + result.stderr
    assert 'incompatible type "str"; expected "float"' in result.stdout
    right = tmp_path / "right.py"
    right.write_text(wrong.read_text().replace("'often'", "2.0"))
    assert _mypy(right).returncode == 0
