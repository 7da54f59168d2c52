"""Repeated runs of the peers scenario become one row per system: medians, every run kept."""

from __future__ import annotations

from typing import Any

from benchmarks.repeats import peer_row


def _run(rate: float, cpu_s: float, *, warm_cpu_s: float | None = None, matches: bool = True,
         lost: int = 0) -> dict[str, Any]:  # fmt: skip
    run = {"system": "flink", "version": "2.3.0", "fragments_per_s": rate,
           "seconds": 1_000_000 / rate, "cpu_s": cpu_s, "cores_busy": 1.5,
           "fragments_per_cpu_s": 1_000_000 / cpu_s, "matches": matches, "lost": lost,
           "extra": 0, "state_bytes": int(cpu_s)}  # fmt: skip
    if warm_cpu_s is not None:
        run.update(cpu_s_after_first_record=warm_cpu_s,
                   fragments_per_cpu_s_after_start=1_000_000 / warm_cpu_s)  # fmt: skip
    return run


def test_one_run_is_its_own_row() -> None:
    run = _run(80_000.0, 25.0)
    assert peer_row([run]) is run


def test_repeated_runs_give_the_median_of_each_rate_and_the_rest_of_the_median_run() -> None:
    runs = [_run(86_000.0, 27.0, warm_cpu_s=21.0), _run(70_000.0, 30.0, warm_cpu_s=24.0),
            _run(90_000.0, 25.0, warm_cpu_s=22.0)]  # fmt: skip
    row = peer_row(runs)
    assert row["fragments_per_cpu_s"] == 1_000_000 / 27.0  # the median, not the best run
    assert row["cpu_s"] == 27.0 and row["fragments_per_s"] == 86_000.0
    assert row["fragments_per_cpu_s_after_start"] == 1_000_000 / 22.0
    assert row["state_bytes"] == 27  # from the run of median fragments per CPU s
    assert row["runs"]["fragments_per_cpu_s"] == [1_000_000 / c for c in (27.0, 30.0, 25.0)]
    assert row["runs"]["fragments_per_s"] == [86_000.0, 70_000.0, 90_000.0]
    assert row["matches"] is True


def test_one_run_that_does_not_match_makes_the_row_not_match() -> None:
    runs = [_run(8e4, 27.0), _run(8e4, 26.0, matches=False, lost=4), _run(8e4, 25.0)]
    row = peer_row(runs)
    assert row["matches"] is False and row["lost"] == 4


def test_a_failed_run_fails_the_row_with_no_number() -> None:
    failed = {"system": "flink", "version": "2.3.0", "error": "did not finish within 300 s"}
    row = peer_row([_run(8e4, 27.0), failed, _run(8e4, 25.0)])
    assert row["error"] == "run 2 of 3: did not finish within 300 s"
    assert "fragments_per_s" not in row and "fragments_per_cpu_s" not in row


def test_the_section_lists_each_repeated_rows_runs_below_the_table() -> None:
    from benchmarks.report_peers import section

    runs = [_run(86_000.0, 27.0, warm_cpu_s=21.0), _run(70_000.0, 30.0, warm_cpu_s=24.0),
            _run(90_000.0, 25.0, warm_cpu_s=22.0)]  # fmt: skip
    row = {**peer_row(runs), "workload": "apache", "state_what": "checkpoints"}
    text, _plots = section({"results": [row]}, 2)
    assert (
        "- apache, flink: 3 runs: fragments per CPU s 37,037, 33,333, 40,000; from the first "
        "record 47,619, 41,667, 45,455; fragments/s 86,000, 70,000, 90,000"
    ) in text
