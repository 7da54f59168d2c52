"""run_all's plan: every reported scenario runs, at the sizes its mode promises."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.report import SCENARIOS
from benchmarks.run_all import _plan


def _args(quick: bool) -> object:
    import argparse

    return argparse.Namespace(
        quick=quick,
        fragments=30_000 if quick else 1_000_000,
        failover_fragments=40_000 if quick else 200_000,
        peer_timeout=1500.0,
    )


@pytest.mark.parametrize("quick", [True, False])
def test_every_reported_scenario_is_planned(quick: bool) -> None:
    assert list(_plan(_args(quick))) == list(SCENARIOS)


def test_quick_keeps_what_the_targets_need_and_cuts_the_rest() -> None:
    quick = {name: arguments for name, (_, arguments) in _plan(_args(True)).items()}
    assert quick["nodes_vs_bare"][-4:] == ["--workload", "apache", "--nodes", "1"]
    assert "--clients" not in quick["nodes_vs_bare"]  # both clients, the default
    assert quick["peers"][quick["peers"].index("--peers") + 1] == "spark"  # the per-core target
    assert quick["engine_memory"] == ["--baseline", "none", "--visitors", "500"]
    full = {name: arguments for name, (_, arguments) in _plan(_args(False)).items()}
    assert full["profile_node"] == ["--fragments", "300000"]
    assert full["nodes_vs_bare"] == ["--fragments", "1000000", "--repeat", "3"]
    assert full["peers"][-2:] == ["--repeat", "3"]  # issue 24's per-CPU ratios, medians of 3
    assert full["produce_command"] == ["--copies", "30", "--repeat", "3"]  # 300,000 real lines
    assert full["producer_workloads"] == ["--fragments", "1000000", "--repeat", "5"]


def test_append_continues_the_run_in_the_output_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchmarks.report import render
    from benchmarks.run_all import _continued, _fresh

    monkeypatch.setenv("SESSIONIZER_BENCH_OUT", str(tmp_path))
    with pytest.raises(SystemExit, match="no run to continue"):
        _continued("python -m benchmarks.run_all --append --only session_memory")
    first = {**_fresh("python -m benchmarks.run_all --only peers", False), "cluster": "local"}
    first["ran"] = ["peers"]
    (tmp_path / "run_all.json").write_text(json.dumps(first))
    meta = _continued("python -m benchmarks.run_all --append --only session_memory")
    assert meta["ran"] == ["peers"] and meta["command"] == first["command"]
    assert meta["continued"][0]["command"].endswith("--only session_memory")
    text = render(meta, tmp_path / "RESULTS.md").read_text()
    assert "Continued by `python -m benchmarks.run_all --append --only session_memory`" in text


def test_every_reported_scenario_has_its_note() -> None:
    # RESULTS.md prints each section's note under its command: a missing one failed the
    # whole report after the scenario had run.
    from benchmarks.report_notes import NOTES

    assert [name for name in SCENARIOS if name not in NOTES] == []
