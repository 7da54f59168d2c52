"""A PNG chart of an aggregation: sessions per hour (bars) and mean duration (line)."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path

from sessionizer.aggregation.figures import Aggregates

__all__ = ["hourly_totals", "write_chart"]


def hourly_totals(aggregates: Aggregates) -> list[tuple[datetime, int, float]]:
    """Per hour over all sites: (hour, sessions, mean duration in seconds), by hour."""
    sessions: dict[datetime, int] = defaultdict(int)
    seconds: dict[datetime, float] = defaultdict(float)
    for row in aggregates.rows:
        sessions[row.hour] += row.sessions
        seconds[row.hour] += row.mean_duration_s * row.sessions
    return [(hour, sessions[hour], seconds[hour] / sessions[hour]) for hour in sorted(sessions)]


def write_chart(aggregates: Aggregates, path: Path, *, title: str) -> Path:
    """Draw the chart into `path` (PNG, matplotlib's Agg backend) and return `path`."""
    import matplotlib

    matplotlib.use("Agg")  # no display: works on servers and in tests
    from matplotlib import dates as mdates
    from matplotlib import pyplot as plt

    totals = hourly_totals(aggregates)
    # Seconds read better than fractions of a minute for short visits.
    longest = max((mean for _, _, mean in totals), default=0.0)
    unit, per_unit = ("minutes", 60.0) if longest >= 120 else ("seconds", 1.0)
    durations = [mean / per_unit for _, _, mean in totals]
    figure, sessions_axis = plt.subplots(figsize=(11, 4.8), dpi=110)
    try:
        duration_axis = sessions_axis.twinx()
        if totals:
            hours = [hour for hour, _, _ in totals]
            # Matplotlib's date axis counts in days: 50 minutes wide, 5 minutes in.
            sessions_axis.bar(
                [mdates.date2num(hour + timedelta(minutes=5)) for hour in hours],
                [count for _, count, _ in totals],
                width=50 / (24 * 60),
                align="edge",
                color="#4c78a8",
                label="sessions",
            )
            duration_axis.plot(
                [mdates.date2num(hour + timedelta(minutes=30)) for hour in hours],
                durations,
                color="#e45756",
                marker="o",
                markersize=3,
                linewidth=1.5,
                label=f"mean duration ({unit})",
            )
            locator = mdates.AutoDateLocator(minticks=4, maxticks=12)
            sessions_axis.xaxis.set_major_locator(locator)
            sessions_axis.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:00", tz="UTC"))
            figure.autofmt_xdate()
        else:
            sessions_axis.text(
                0.5, 0.5, "no sessions", ha="center", transform=sessions_axis.transAxes
            )
            for axis in (sessions_axis.xaxis, sessions_axis.yaxis, duration_axis.yaxis):
                axis.set_ticks([])
        sessions_axis.set_ylabel("sessions per hour", color="#4c78a8")
        duration_axis.set_ylabel(f"mean session duration ({unit})", color="#e45756")
        sessions_axis.set_xlabel("hour (UTC)")
        # Headroom above the data keeps the legend (upper left) clear of the bars.
        sessions_axis.set_ylim(0, max((count for _, count, _ in totals), default=1) * 1.3)
        duration_axis.set_ylim(0, max(durations, default=1.0) * 1.3 or 1.0)
        sessions_axis.grid(axis="y", alpha=0.3)
        sessions_axis.set_title(title)
        handles = sessions_axis.get_legend_handles_labels()
        more = duration_axis.get_legend_handles_labels()
        if handles[0]:
            sessions_axis.legend(handles[0] + more[0], handles[1] + more[1], loc="upper left")
        figure.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, format="png")
    finally:
        plt.close(figure)
    return path
