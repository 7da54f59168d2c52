"""RESULTS.md's failover and skew sections render the handover and balancing rows."""

from __future__ import annotations

from typing import Any

from benchmarks import report_sections
from benchmarks.report_plots import Plot, plt


def _names(plots: list[Plot]) -> list[str]:
    for _, figure in plots:
        plt().close(figure)
    return [name for name, _ in plots]


def _failover_row(mode: str, handover: str, replayed: int, used: int) -> dict[str, Any]:
    return {
        "mode": mode,
        "handover": handover,
        "runs": 1,
        "streams_moved": 5,
        "handovers_used": used,
        "first_resumed_s": 0.5,
        "resumed_s": 0.7,
        "caught_up_s": 2.0,
        "replayed": replayed,
        "duplicates": 0,
        "exact": True,
    }


def test_the_failover_section_compares_each_planned_move_with_and_without_handover() -> None:
    payload = {
        "params": {"session_timeout": 4.0, "drain": 5.0},
        "results": [
            _failover_row("kill -9", "-", 40, 0),
            _failover_row("SIGTERM", "on", 0, 3),
            _failover_row("SIGTERM", "off", 22, 0),
            _failover_row("join", "on", 0, 2),
        ],
    }
    text, plots = report_sections.failover(payload, 2)
    assert "| SIGTERM | off | 1 | 5 | 0 |" in text
    assert "- SIGTERM: with handover 0 records replayed (3 of 5 moved streams" in text
    assert "without, 22 replayed" in text
    assert "- join:" not in text and "- kill -9:" not in text  # run one way only
    assert _names(plots) == ["failover"]


def test_the_skew_section_shows_loads_imbalance_and_moves() -> None:
    rows = [
        {"policy": "count", "nodes": 2, "loads": "n1 135 / n2 457", "imbalance": 1.54,
         "moves": 8, "load_moves": 0, "settle_s": 1.0, "steady": True, "exact": True},
        {"policy": "load", "nodes": 2, "loads": "n1 283 / n2 302", "imbalance": 1.03,
         "moves": 3, "load_moves": 3, "settle_s": None, "steady": False, "exact": True},
    ]  # fmt: skip
    payload = {"params": {"rate": 600.0, "interval": 6.0}, "hot_share": 0.7, "results": rows}
    text, plots = report_sections.skew(payload, 2)
    assert "| count | 2 | n1 135 / n2 457 | 1.54 | 8 | 0 | 1.00 | yes | yes |" in text
    assert "| load | 2 | n1 283 / n2 302 | 1.03 | 3 | 3 | - | no | yes |" in text
    assert "70% of them on 4 of 16 streams" in text
    assert _names(plots) == ["skew"]
