"""Plot helpers of the report: matplotlib loaded lazily, grouped bars, byte labels, saving."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.tables import cell

__all__ = ["Plot", "bars", "plt", "save", "size"]

Plot = tuple[str, Any]
"""A named matplotlib figure: saved by the report as plots/<name>.png."""


def plt() -> Any:
    """matplotlib's pyplot on the Agg backend (imported only when a report is rendered)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    return pyplot


def save(plot: Plot, directory: Path) -> str:
    """Write the figure to `directory/<name>.png`; return its path relative to the report."""
    name, figure = plot
    directory.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(directory / f"{name}.png", dpi=110)
    plt().close(figure)
    return f"{directory.name}/{name}.png"


def size(value: float) -> str:
    """Bytes in decimal units: 950 B, 1.2 KB, 3.4 MB."""
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1000
    return ""


def bars(
    ax: Any,
    groups: Sequence[str],
    series: Mapping[Any, Sequence[float | None]],
    label: Callable[[float], str] = cell,
) -> None:
    """Grouped bars, each labelled with its value; a missing value is no bar."""
    width = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series.items()):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        heights = [v or 0 for v in values]
        drawn = ax.bar(xs, heights, width, label=name)
        for bar, value in zip(drawn, values, strict=True):
            if value:
                ax.annotate(
                    label(float(value)),
                    (bar.get_x() + bar.get_width() / 2, value),
                    ha="center",
                    va="bottom",
                    fontsize=7,
                )
    ax.set_xticks(range(len(groups)), groups)
    ax.legend(fontsize=8)
