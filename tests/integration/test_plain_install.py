"""A plain install runs the CLI: the image's smoke test against `pip install`, no extras.

What the Dockerfile does, without Docker: the files it copies into its build, a
fresh virtualenv, `pip install` of them with no extras (so no pytest, no test
support), then `deploy/smoke-test.sh`, the script the image runs: `sessionizer
--version`, `python -m sessionizer --version` and the help of every command. pip
takes the dependencies from PyPI or its cache (pyspark's wheel is large): a minute
or two. No server is started.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
SMOKE_TEST = ROOT / "deploy" / "smoke-test.sh"


def _build_sources() -> list[str]:
    """What the Dockerfile copies into the directory it installs (`COPY ... /tmp/src/...`)."""
    sources = []
    for line in DOCKERFILE.read_text().splitlines():
        words = line.split()
        if words[:1] == ["COPY"] and words[-1].startswith("/tmp/src"):
            sources.extend(words[1:-1])
    assert "pyproject.toml" in sources, "the Dockerfile installs from /tmp/src"
    return sources


@pytest.fixture
def venv(tmp_path: Path) -> Iterator[Path]:
    """A fresh virtualenv, removed afterwards (with pyspark it holds about 500 MB)."""
    path = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=300)
    yield path
    shutil.rmtree(path)


def _environment(venv: Path) -> dict[str, str]:
    """This environment, with the virtualenv first and nothing of the checkout on the path."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}  # fmt: skip
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    return env


def test_a_plain_install_in_a_fresh_virtualenv_passes_the_images_smoke_test(
    tmp_path: Path, venv: Path
) -> None:
    source = tmp_path / "src"
    source.mkdir()
    for name in _build_sources():
        origin = ROOT / name
        if origin.is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
            shutil.copytree(origin, source / name, ignore=ignore)
        else:
            shutil.copy2(origin, source / name)
    env = _environment(venv)
    python = str(venv / "bin" / "python")
    install = subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(source)],
        capture_output=True, text=True, timeout=1200, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert install.returncode == 0, f"pip install failed:\n{install.stderr[-4000:]}"
    listed = subprocess.run(
        [python, "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
        capture_output=True, text=True, timeout=120, env=env, check=True,
    )  # fmt: skip
    installed = {re.split(r"[=<>]", line)[0].lower() for line in listed.stdout.splitlines()}
    assert "sessionizer" in installed
    assert not installed & {"pytest", "hypothesis", "testcontainers"}, "no extras: no test tools"
    # cwd outside the checkout: `python -m sessionizer` must find the installed package.
    smoke = subprocess.run(
        ["sh", str(SMOKE_TEST)], capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path
    )
    assert smoke.returncode == 0, f"smoke test failed:\n{smoke.stdout}\n{smoke.stderr[-4000:]}"
    version = re.search(r'^version = "(.+)"$', (ROOT / "pyproject.toml").read_text(), re.M)
    assert version, "pyproject.toml has a version"
    assert smoke.stdout.splitlines()[:2] == [f"sessionizer {version[1]}"] * 2
    assert "every command has its help" in smoke.stdout
