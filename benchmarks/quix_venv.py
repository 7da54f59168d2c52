"""The Quix Streams peer's own venv: Quix pins a confluent-kafka a node must not run on.

    .venv/bin/python -m benchmarks.quix_venv      (`make bench` runs it)

Quix Streams 3.28.1 requires confluent-kafka below 2.13, whose librdkafka aborts a
reader reassigned while a removal is pending (framework.kernel.transport). So the
peer runs from `.venv-quix`, with the project on PYTHONPATH (benchmarks.peers),
and the project's own venv keeps a confluent-kafka it may use. That venv holds
Quix Streams and the project's dependencies except confluent-kafka (Quix's pin
decides it) and pyspark (the peer never imports it).
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from benchmarks.common import progress

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv-quix"
PYTHON = VENV / "bin" / "python"
QUIX = "quixstreams==3.28.1"
_LEFT_OUT = ("confluent-kafka", "pyspark")
_STAMP = VENV / ".installed"


def requirements() -> list[str]:
    """What the venv installs: Quix Streams and the project's dependencies but `_LEFT_OUT`."""
    with (ROOT / "pyproject.toml").open("rb") as file:
        dependencies: list[str] = tomllib.load(file)["project"]["dependencies"]
    return [QUIX, *(d for d in dependencies if not d.startswith(_LEFT_OUT))]


def version() -> str | None:
    """Quix Streams' version in its venv; None when the venv is not there (or broken)."""
    if not PYTHON.exists():
        return None
    ask = "from importlib import metadata; print(metadata.version('quixstreams'))"
    found = subprocess.run(
        [str(PYTHON), "-c", ask],
        capture_output=True,
        text=True,
    )
    return found.stdout.strip() if found.returncode == 0 else None


def ensure() -> None:
    """Create or update the venv unless it already holds exactly `requirements()`."""
    wanted = "\n".join(requirements())
    if _STAMP.exists() and _STAMP.read_text() == wanted and version() is not None:
        progress(f"quix venv: {VENV} is up to date")
        return
    progress(f"quix venv: installing {QUIX} into {VENV} (about a minute)...")
    subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    pip = [str(PYTHON), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    subprocess.run([*pip, *requirements()], check=True)
    _STAMP.write_text(wanted)
    progress(f"quix venv: Quix Streams {version()} ready")


if __name__ == "__main__":
    ensure()
