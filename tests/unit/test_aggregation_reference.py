"""The pure-Python aggregation (the definition the Spark job is checked against)."""

from __future__ import annotations

import json
import statistics
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionizer.aggregation import (
    NO_SITE,
    Aggregates,
    HourlyFigures,
    LandingPage,
    aggregate_sessions,
    format_table,
    percentile,
)
from sessionizer.aggregation.chart import hourly_totals
from sessionizer.aggregation.figures import HOUR_MS, hour_of
from sessionizer.aggregation.python_figures import deduplicate, is_session, site_of

T10 = int(datetime(2015, 5, 17, 10, tzinfo=UTC).timestamp() * 1000)


def session(sid: str, first_ts: int, duration_ms: int, fragments: int, **extra: Any) -> dict:
    """A finished session as `<app>.sessions` carries it."""
    return {
        "session_id": sid,
        "key": extra.pop("key", f"visitor-{sid}"),
        "stream": "app.stream.0000",
        "first_offset": 0,
        "last_offset": fragments - 1,
        "first_ts": first_ts,
        "last_ts": first_ts + duration_ms,
        "fragments": fragments,
        **extra,
    }


# -- p95 ---------------------------------------------------------------------------------


def test_percentile_interpolates_linearly_between_closest_ranks() -> None:
    assert percentile([15, 20, 35, 40, 50], 0.4) == pytest.approx(29.0)  # x = 1.6
    assert percentile([1, 2, 3, 4], 0.95) == pytest.approx(3.85)  # x = 2.85
    assert percentile(list(range(1, 21)), 0.95) == pytest.approx(19.05)  # x = 18.05


def test_percentile_at_a_whole_rank_is_that_value() -> None:
    assert percentile([7], 0.95) == 7.0
    assert percentile([3, 1, 2], 0.5) == 2.0
    assert percentile([3, 1, 2], 0.0) == 1.0
    assert percentile([3, 1, 2], 1.0) == 3.0


def test_percentile_rejects_no_values_and_bad_fractions() -> None:
    with pytest.raises(ValueError, match="no values"):
        percentile([], 0.95)
    with pytest.raises(ValueError, match="within"):
        percentile([1], 1.5)


@given(st.lists(st.integers(min_value=0, max_value=10**8), min_size=2, max_size=300))
def test_percentile_is_the_inclusive_type_7_quantile(values: list[int]) -> None:
    # statistics' "inclusive" method is the same definition (Hyndman-Fan type 7),
    # computed independently: its 95th of 100 cut points is our p95.
    expected = statistics.quantiles(values, n=100, method="inclusive")[94]
    assert percentile(values, 0.95) == pytest.approx(expected, rel=1e-12, abs=1e-6)


# -- what counts -------------------------------------------------------------------------


def test_duplicates_count_once_and_non_sessions_not_at_all() -> None:
    first = session("a", T10, 1000, 2)
    records = [
        first,
        dict(first),
        session("b", T10, 0, 1),
        {"session_id": "c", "key": "k"},  # no times, no fragments
        {**session("d", T10, 5, 2), "first_ts": "yesterday"},
        {**session("e", T10, 5, 2), "fragments": True},  # a bool is not a count
        {**session("f", T10, 5, 2), "session_id": None},
    ]
    assert [s["session_id"] for s in deduplicate(records)] == ["a", "b"]
    assert aggregate_sessions(records).total_sessions == 2
    assert not is_session(records[3])


def test_site_defaults_to_a_dash() -> None:
    assert site_of({"site": "t.co"}) == "t.co"
    assert site_of({}) == NO_SITE
    assert site_of({"site": None}) == NO_SITE
    assert site_of({"site": ""}) == NO_SITE


def test_hour_is_the_utc_hour_of_first_ts() -> None:
    assert hour_of(T10) == datetime(2015, 5, 17, 10, tzinfo=UTC)
    assert hour_of(T10 + HOUR_MS - 1) == datetime(2015, 5, 17, 10, tzinfo=UTC)
    assert hour_of(T10 - 1) == datetime(2015, 5, 17, 9, tzinfo=UTC)
    assert hour_of(-1) == datetime(1969, 12, 31, 23, tzinfo=UTC)  # floor, not truncation


# -- the figures -------------------------------------------------------------------------


def test_figures_of_one_group_by_hand() -> None:
    records = [
        session("a", T10, 0, 1, key="v1", site="t.co", landing_page="/"),
        session("b", T10 + 60_000, 60_000, 3, key="v1", site="t.co", landing_page="/blog"),
        session("c", T10 + 120_000, 120_000, 5, key="v2", site="t.co", landing_page="/"),
        session("d", T10 + HOUR_MS - 1, 3_000, 2, key="v3", site="t.co"),
    ]
    (row,) = aggregate_sessions(records).rows
    assert row == HourlyFigures(
        hour=datetime(2015, 5, 17, 10, tzinfo=UTC),
        site="t.co",
        sessions=4,
        visitors=3,
        mean_duration_s=(0 + 60 + 120 + 3) / 4,
        p95_duration_s=percentile([0, 3_000, 60_000, 120_000], 0.95) / 1000,  # 111.0
        pages_per_session=(1 + 3 + 5 + 2) / 4,
        bounce_rate=0.25,
    )
    assert row.p95_duration_s == pytest.approx(111.0)


def test_rows_are_ordered_by_hour_then_site() -> None:
    records = [
        session("a", T10 + HOUR_MS, 0, 1, site="b.example"),
        session("b", T10 + HOUR_MS, 0, 1),
        session("c", T10, 0, 1, site="z.example"),
        session("d", T10 + HOUR_MS, 0, 1, site="a.example"),
    ]
    keys = [(row.hour.hour, row.site) for row in aggregate_sessions(records).rows]
    assert keys == [(10, "z.example"), (11, "-"), (11, "a.example"), (11, "b.example")]


def test_top_landing_pages_rank_by_sessions_then_page() -> None:
    pages = ["/b", "/a", "/b", "/c", "/a", "/b", None, "/d"]
    records = [session(f"s{i}", T10, 0, 1, landing_page=p) for i, p in enumerate(pages)]
    records.append(session("no-page", T10, 0, 1))
    top = aggregate_sessions(records, top=3).top_landing_pages
    assert top == (LandingPage("/b", 3), LandingPage("/a", 2), LandingPage("/c", 1))


def test_no_sessions_no_rows() -> None:
    aggregates = aggregate_sessions([{"not": "a session"}])
    assert aggregates == Aggregates((), ())
    assert "(no sessions)" in format_table(aggregates)


# -- output shapes -----------------------------------------------------------------------


def test_json_shape() -> None:
    records = [session("a", T10, 1500, 2, site="t.co", landing_page="/")]
    document = json.loads(json.dumps(aggregate_sessions(records).to_json()))
    assert set(document) == {"rows", "top_landing_pages"}
    (row,) = document["rows"]
    assert row == {
        "hour": "2015-05-17T10:00:00+00:00",
        "site": "t.co",
        "sessions": 1,
        "visitors": 1,
        "mean_duration_s": 1.5,
        "p95_duration_s": 1.5,
        "pages_per_session": 2.0,
        "bounce_rate": 0.0,
    }
    assert datetime.fromisoformat(row["hour"]).tzinfo is not None
    assert document["top_landing_pages"] == [{"landing_page": "/", "sessions": 1}]


def test_table_lists_rows_and_landing_pages() -> None:
    records = [session("a", T10, 90_000, 4, site="t.co", landing_page="/start")]
    table = format_table(aggregate_sessions(records))
    assert "2015-05-17 10:00 t.co" in table
    assert "90.0" in table
    assert "/start" in table


def test_chart_totals_weight_each_sites_mean_by_its_sessions() -> None:
    records = [
        session("a", T10, 60_000, 2, site="x"),
        session("b", T10, 60_000, 2, site="y"),
        session("c", T10, 240_000, 2, site="y"),
    ]
    ((hour, sessions, mean_seconds),) = hourly_totals(aggregate_sessions(records))
    assert (hour.hour, sessions) == (10, 3)
    assert mean_seconds == pytest.approx(120.0)  # (60 + 60 + 240) / 3
