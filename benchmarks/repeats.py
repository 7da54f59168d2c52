"""Repeated runs of a scenario's row, as one row: the medians, and the run they centre on."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

__all__ = ["median_run", "medians", "peer_row"]


def median_run(runs: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """A copy of the run whose `key` is the median (the lower one of an even count)."""
    ordered = sorted(runs, key=lambda run: run[key])
    return dict(ordered[(len(ordered) - 1) // 2])


def medians(runs: list[dict[str, Any]], keys: Iterable[str]) -> dict[str, Any]:
    """The median of each of `keys` over the runs that measured it (None: none did)."""
    found: dict[str, Any] = {}
    for key in keys:
        values = [run[key] for run in runs if run.get(key) is not None]
        found[key] = statistics.median(values) if values else None
    return found


_PEER_MEDIANS = (
    "fragments_per_s",
    "seconds",
    "wall_s",
    "cpu_s",
    "cpu_s_after_first_record",
    "fragments_per_cpu_s",
    "fragments_per_cpu_s_after_start",
    "cores_busy",
)


def peer_row(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A `benchmarks.peers` row for one system's runs: the median of each rate and time, the
    rest from the run of median fragments per CPU s, every run's rates kept; a failed run
    fails the row."""
    failed = [(i, run) for i, run in enumerate(runs, start=1) if run.get("error")]
    if failed:
        turn, run = failed[0]
        shown = run["error"] if len(runs) == 1 else f"run {turn} of {len(runs)}: {run['error']}"
        return {**run, "error": shown}
    if len(runs) == 1:
        return runs[0]
    measured = all(run.get("fragments_per_cpu_s") for run in runs)
    row = median_run(runs, "fragments_per_cpu_s" if measured else "fragments_per_s")
    row.update(medians(runs, _PEER_MEDIANS))
    row["matches"] = all(run.get("matches") for run in runs)
    for key in ("lost", "extra", "duplicates"):
        if key in row:
            row[key] = max(run.get(key) or 0 for run in runs)
    row["runs"] = {
        key: [run.get(key) for run in runs]
        for key in ("fragments_per_s", "fragments_per_cpu_s", "fragments_per_cpu_s_after_start")
    }
    return row
