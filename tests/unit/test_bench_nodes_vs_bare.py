"""Repeated runs of the nodes-against-bare-readers scenario become one row of medians."""

from __future__ import annotations

from typing import Any

from benchmarks.nodes_vs_bare import median_row


def _run(bare: float, relay: float, node: float, *, exact: bool = True) -> dict[str, Any]:
    return {"workload": "apache", "client": "confluent", "n": 1,
            "bare_fragments_per_s": bare, "relay_fragments_per_s": relay,
            "node_fragments_per_s": node, "node_per_core": node * 1.1,
            "node_seconds": 1_000_000 / node, "node_exact": exact, "node_lost": 0,
            "node_extra": 0, "node_duplicates": 0 if exact else 3}  # fmt: skip


def test_one_run_is_its_own_row() -> None:
    run = _run(600_000.0, 700_000.0, 95_000.0)
    assert median_row([run]) is run


def test_repeated_runs_give_median_rates_and_the_ratios_of_those_medians() -> None:
    runs = [
        _run(600_000.0, 900_000.0, 91_000.0),
        _run(500_000.0, 700_000.0, 110_000.0),
        _run(700_000.0, 800_000.0, 102_000.0),
    ]
    row = median_row(runs)
    assert row["node_fragments_per_s"] == 102_000.0
    assert row["bare_fragments_per_s"] == 600_000.0
    assert row["relay_fragments_per_s"] == 800_000.0
    assert row["ratio"] == 102_000.0 / 600_000.0
    assert row["relay_ceiling"] == 800_000.0 / 600_000.0
    assert row["ratio_to_relay"] == 102_000.0 / 800_000.0
    assert row["node_seconds"] == 1_000_000 / 102_000.0  # from the nodes' median run
    assert row["runs"]["node"] == [91_000.0, 110_000.0, 102_000.0]
    assert row["runs"]["bare"] == [600_000.0, 500_000.0, 700_000.0]
    assert row["node_exact"] is True


def test_one_inexact_run_makes_the_row_inexact() -> None:
    runs = [_run(6e5, 8e5, 9e4), _run(6e5, 8e5, 1e5, exact=False), _run(6e5, 8e5, 1.1e5)]
    row = median_row(runs)
    assert row["node_exact"] is False
    assert row["node_duplicates"] == 3
