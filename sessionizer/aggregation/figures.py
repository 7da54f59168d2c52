"""What the aggregation reports: the figures, their exact definitions, the JSON and the table.

Both computations (`reference.aggregate_sessions` in pure Python and the Spark
job) return an `Aggregates`, so they can be compared field by field.  Over the
sessions left after dropping duplicate `session_id`s and records that are not
sessions (`REQUIRED_FIELDS` missing or mistyped), grouped by `hour` (the UTC
hour of `first_ts`) and `site` (`NO_SITE` when a session has none):

- `sessions`: how many; `visitors`: distinct `key`s;
- `mean_duration_s`, `p95_duration_s`: of `(last_ts - first_ts) / 1000`; the
  p95 is exact, interpolated linearly between closest ranks: with the n
  durations in milliseconds sorted, `x = 0.95 * (n - 1)`, it is
  `(ceil(x) - x) * d[floor(x)] + (x - floor(x)) * d[ceil(x)]` (`d[x]` when `x`
  is whole), divided by 1000.  This is Spark's `percentile` (not
  `percentile_approx`) and numpy's default ("linear", Hyndman-Fan type 7);
- `pages_per_session`: mean `fragments`; `bounce_rate`: share of sessions of
  exactly one fragment.

`top_landing_pages`: over all hours and sites, the `TOP_LANDING_PAGES` pages
that most sessions landed on (sessions with a string `landing_page`), most
sessions first, ties by page.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

__all__ = [
    "HOUR_MS",
    "NO_SITE",
    "P95",
    "REQUIRED_FIELDS",
    "TOP_LANDING_PAGES",
    "Aggregates",
    "HourlyFigures",
    "LandingPage",
    "format_table",
    "hour_of",
]

HOUR_MS = 3_600_000
"""Milliseconds per hour: a session's hour is `first_ts - first_ts mod HOUR_MS`."""
P95 = 0.95
"""The percentile reported for session durations."""
NO_SITE = "-"
"""The `site` of sessions that carry none (also the weblog example's "no referrer")."""
TOP_LANDING_PAGES = 10
"""How many landing pages `top_landing_pages` lists."""
REQUIRED_FIELDS: Mapping[str, type] = MappingProxyType(
    {"session_id": str, "key": str, "first_ts": int, "last_ts": int, "fragments": int}
)
"""The fields (and JSON types) a record of `<app>.sessions` needs to be counted."""


def hour_of(epoch_ms: int) -> datetime:
    """The UTC hour, as an aware datetime, that an epoch-millisecond time falls in."""
    return datetime.fromtimestamp((epoch_ms - epoch_ms % HOUR_MS) / 1000, tz=UTC)


@dataclass(frozen=True, slots=True)
class HourlyFigures:
    """The figures of one (hour, site) group."""

    hour: datetime
    site: str
    sessions: int
    visitors: int
    mean_duration_s: float
    p95_duration_s: float
    pages_per_session: float
    bounce_rate: float

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict; `hour` as an ISO 8601 UTC timestamp."""
        return {**asdict(self), "hour": self.hour.astimezone(UTC).isoformat()}


@dataclass(frozen=True, slots=True)
class LandingPage:
    """A landing page and how many sessions started on it."""

    landing_page: str
    sessions: int


@dataclass(frozen=True, slots=True)
class Aggregates:
    """All figures of one run: rows ordered by (hour, site), then the top landing pages."""

    rows: tuple[HourlyFigures, ...]
    top_landing_pages: tuple[LandingPage, ...]

    @property
    def total_sessions(self) -> int:
        """Sessions counted over all rows."""
        return sum(row.sessions for row in self.rows)

    def to_json(self) -> dict[str, Any]:
        """`{"rows": [...], "top_landing_pages": [...]}`, what `aggregate --json` prints."""
        return {
            "rows": [row.to_json() for row in self.rows],
            "top_landing_pages": [asdict(page) for page in self.top_landing_pages],
        }


def format_table(aggregates: Aggregates) -> str:
    """A readable fixed-width table of the rows, then the top landing pages."""
    header = (
        f"{'hour (UTC)':<17} {'site':<24} {'sessions':>8} {'visitors':>8} "
        f"{'mean s':>8} {'p95 s':>8} {'pages':>6} {'bounce':>7}"
    )
    lines = [header, "-" * len(header)]
    for row in aggregates.rows:
        lines.append(
            f"{row.hour.astimezone(UTC):%Y-%m-%d %H:%M} {_clip(row.site, 24):<24} "
            f"{row.sessions:>8} {row.visitors:>8} {row.mean_duration_s:>8.1f} "
            f"{row.p95_duration_s:>8.1f} {row.pages_per_session:>6.2f} {row.bounce_rate:>7.1%}"
        )
    if not aggregates.rows:
        lines.append("(no sessions)")
    lines.append(f"total sessions: {aggregates.total_sessions}")
    if aggregates.top_landing_pages:
        lines += ["", "top landing pages (sessions)"]
        lines += [f"{p.sessions:>8}  {p.landing_page}" for p in aggregates.top_landing_pages]
    return "\n".join(lines)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
