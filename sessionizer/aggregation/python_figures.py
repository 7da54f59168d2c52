"""The aggregation in plain Python over session dicts: what the Spark job must match.

No Spark here: this module is the independent check of `spark_job`, and it is
small enough to read as the specification (see `figures` for the words).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from framework.kernel.errors import InvalidArgument
from sessionizer.aggregation.figures import (
    NO_SITE,
    P95,
    REQUIRED_FIELDS,
    TOP_LANDING_PAGES,
    Aggregates,
    HourlyFigures,
    LandingPage,
    hour_of,
)

__all__ = ["aggregate_sessions", "deduplicate", "is_session", "percentile", "site_of"]

Session = Mapping[str, Any]


def percentile(values: Sequence[float], fraction: float) -> float:
    """The exact percentile of `values`, linear between closest ranks (Spark's `percentile`)."""
    if not values:
        raise InvalidArgument("the percentile of no values is undefined")
    if not 0.0 <= fraction <= 1.0:
        raise InvalidArgument(f"fraction must be within [0, 1], got {fraction}")
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    lower, higher = math.floor(position), math.ceil(position)
    if lower == higher:
        return float(ordered[lower])
    # The same expression, in the same order, as Spark's Percentile.getPercentile.
    return (higher - position) * ordered[lower] + (position - lower) * ordered[higher]


def is_session(record: Session) -> bool:
    """True if a record has every required field with its JSON type (bool is not an int)."""
    return all(
        isinstance(record.get(name), kind) and not isinstance(record.get(name), bool)
        for name, kind in REQUIRED_FIELDS.items()
    )


def deduplicate(records: Iterable[Session]) -> list[Session]:
    """The sessions among `records`, the first of each `session_id` only, in input order."""
    unique: dict[str, Session] = {}
    for record in records:
        if is_session(record):
            unique.setdefault(record["session_id"], record)
    return list(unique.values())


def site_of(session: Session) -> str:
    """A session's `site` if it carries a non-empty string one, else `NO_SITE`."""
    site = session.get("site")
    return site if isinstance(site, str) and site else NO_SITE


def aggregate_sessions(records: Iterable[Session], *, top: int = TOP_LANDING_PAGES) -> Aggregates:
    """Every figure of `figures`, from records as read from `<app>.sessions` (with duplicates)."""
    sessions = deduplicate(records)
    groups: dict[tuple[datetime, str], list[Session]] = defaultdict(list)
    for session in sessions:
        groups[(hour_of(session["first_ts"]), site_of(session))].append(session)
    rows = tuple(_figures(hour, site, groups[(hour, site)]) for hour, site in sorted(groups))
    landings = Counter(
        s["landing_page"] for s in sessions if isinstance(s.get("landing_page"), str)
    )
    ranked = sorted(landings.items(), key=lambda item: (-item[1], item[0]))[:top]
    return Aggregates(rows, tuple(LandingPage(page, count) for page, count in ranked))


def _figures(hour: datetime, site: str, group: list[Session]) -> HourlyFigures:
    n = len(group)
    durations_ms = [s["last_ts"] - s["first_ts"] for s in group]
    return HourlyFigures(
        hour=hour,
        site=site,
        sessions=n,
        visitors=len({s["key"] for s in group}),
        mean_duration_s=sum(durations_ms) / n / 1000,
        p95_duration_s=percentile(durations_ms, P95) / 1000,
        pages_per_session=sum(s["fragments"] for s in group) / n,
        bounce_rate=sum(1 for s in group if s["fragments"] == 1) / n,
    )
