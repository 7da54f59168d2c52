"""`benchmarks/gc_probe`: a node process's collections counted and timed, thresholds forced."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROBE = Path(__file__).resolve().parents[2] / "benchmarks" / "gc_probe"


def _run(tmp_path: Path, argv: list[str], **env: str) -> list[Path]:
    script = "import gc\ngc.set_threshold(5, 5, 5)\ngc.collect()\n"
    out = tmp_path / "gc"
    subprocess.run(
        [sys.executable, "-", *argv],
        input=script,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(PROBE), "SESSIONIZER_GC_PROBE_OUT": str(out), **env},
    )
    return sorted(tmp_path.glob("gc.*"))


def test_a_node_process_reports_its_collections_with_the_forced_thresholds(tmp_path: Path) -> None:
    (report,) = _run(tmp_path, ["node"], SESSIONIZER_GC_PROBE_THRESHOLDS="7,8,9")
    line = report.read_text()
    assert line.startswith("thresholds (7, 8, 9) ")
    collections = line.split("collections [", 1)[1].split("]", 1)[0]
    assert int(collections.split(",")[2]) >= 1  # the explicit full collection


def test_any_other_process_is_left_alone(tmp_path: Path) -> None:
    assert _run(tmp_path, ["status"]) == []
