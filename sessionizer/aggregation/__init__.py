"""Aggregation of finished sessions: per hour and site, with PySpark (`sessionizer aggregate`).

The definitions and the pure-Python reference import no Spark and are exported
here; the Spark job lives in `modes` (once or streaming), `spark_job` (DataFrames) and
`spark_session` (starting Spark with its Kafka source).
"""

from __future__ import annotations

from sessionizer.aggregation.errors import AggregationError, SessionsTopicError, SparkSetupError
from sessionizer.aggregation.figures import (
    NO_SITE,
    P95,
    TOP_LANDING_PAGES,
    Aggregates,
    HourlyFigures,
    LandingPage,
    format_table,
)
from sessionizer.aggregation.python_figures import aggregate_sessions, percentile

__all__ = [
    "NO_SITE",
    "P95",
    "TOP_LANDING_PAGES",
    "Aggregates",
    "AggregationError",
    "HourlyFigures",
    "LandingPage",
    "SessionsTopicError",
    "SparkSetupError",
    "aggregate_sessions",
    "format_table",
    "percentile",
]
