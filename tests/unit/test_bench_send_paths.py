"""`benchmarks.send_paths` runs without a broker and reports every path it names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import send_paths


def test_every_send_path_is_timed_without_a_broker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SESSIONIZER_BENCH_OUT", str(tmp_path))
    assert send_paths.main(["--records", "300", "--rounds", "1"]) == 0
    rows = json.loads((tmp_path / "send_paths.json").read_text())["rows"]
    assert [row["path"] for row in rows] == [
        "produce alone",
        "fragments (FragmentPath.queue)",
        "watermarks (transport send)",
        "sink (send with a token)",
    ]
    assert all(row["cpu_ns_per_record"] > 0 for row in rows)
