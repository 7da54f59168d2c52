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
        "from framework.kernel.config import ConnectionConfig\n\n"
        "config = NodeConfig(ConnectionConfig('zk:1', 'kafka:1'), commit_interval='often')\n"
    )
    result = _mypy(wrong)
    assert result.returncode == 1, result.stdout + result.stderr
    assert 'incompatible type "str"; expected "float"' in result.stdout
    right = tmp_path / "right.py"
    right.write_text(wrong.read_text().replace("'often'", "2.0"))
    assert _mypy(right).returncode == 0


def test_a_processor_is_generic_over_its_session_state(tmp_path: Path) -> None:
    source = tmp_path / "visits.py"
    source.write_text(
        "from collections.abc import Mapping\n"
        "from typing import Any\n"
        "from framework import StreamProcessor\n\n"
        "class Visits(StreamProcessor[dict[str, int]]):\n"
        "    def open(self, key: str, fragment: Mapping[str, Any]) -> dict[str, int]:\n"
        "        return {'pages': 0}\n\n"
        "    def update(self, session: dict[str, int], fragment: Mapping[str, Any]) -> None:\n"
        "        session['pages'] += 1\n\n"
        "    def close(self, key: str, session: dict[str, int]) -> Mapping[str, Any]:\n"
        "        return session\n"
    )
    assert _mypy(source).returncode == 0
    source.write_text(source.read_text().replace("-> dict[str, int]:", "-> list[int]:"))
    result = _mypy(source)
    assert result.returncode == 1 and "open" in result.stdout, result.stdout
