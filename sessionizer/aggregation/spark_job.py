"""The aggregation as Spark DataFrames: read `<app>.sessions`, parse, de-duplicate, figure.

Each function builds a plan and runs nothing; `runner` decides when to execute
and where results go.  The figures match `figures` (their definition) and
`reference` (the pure-Python check): exact `percentile`, never an approximation.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from framework.kernel.kafka_settings import java_client_settings
from sessionizer.aggregation.figures import (
    HOUR_MS,
    NO_SITE,
    P95,
    REQUIRED_FIELDS,
    Aggregates,
    HourlyFigures,
    LandingPage,
)

__all__ = [
    "SESSION_SCHEMA",
    "collect_aggregates",
    "deduplicate",
    "deduplicate_stream",
    "hourly_figures",
    "parse_records",
    "read_sessions_batch",
    "read_sessions_stream",
    "sessions_only",
    "top_landing_pages",
]

SESSION_SCHEMA = StructType(
    [
        StructField("session_id", StringType()),
        StructField("key", StringType()),
        StructField("stream", StringType()),
        StructField("first_ts", LongType()),
        StructField("last_ts", LongType()),
        StructField("fragments", LongType()),
        StructField("site", StringType()),
        StructField("landing_page", StringType()),
    ]
)
"""The session fields the aggregation reads (missing ones are null); also the session table's."""


def _kafka_options(
    bootstrap: str, topic: str, properties: Mapping[str, str] | None
) -> dict[str, str]:
    """Spark's Kafka source options: the Java client's properties, each prefixed `kafka.`.

    Committed records only: an exactly-once node's aborted transactions stay in
    the log, and their sessions must not be counted.
    """
    client = {f"kafka.{k}": v for k, v in java_client_settings(properties or {}).items()}
    return {
        **client,
        "kafka.isolation.level": "read_committed",
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topic,
        "startingOffsets": "earliest",
    }


def read_sessions_batch(
    spark: SparkSession, bootstrap: str, topic: str, properties: Mapping[str, str] | None = None
) -> DataFrame:
    """Every record of `topic` from its start to its end at the time the plan runs."""
    options = _kafka_options(bootstrap, topic, properties)
    return spark.read.format("kafka").options(**options, endingOffsets="latest").load()


def read_sessions_stream(
    spark: SparkSession, bootstrap: str, topic: str, properties: Mapping[str, str] | None = None
) -> DataFrame:
    """The records of `topic` as a stream (from its start on a fresh checkpoint)."""
    options = _kafka_options(bootstrap, topic, properties)
    return spark.readStream.format("kafka").options(**options).load()


def parse_records(records: DataFrame) -> DataFrame:
    """Kafka records → `SESSION_SCHEMA` columns plus `is_session` (every required field set)."""
    parsed = records.select(
        F.from_json(F.col("value").cast("string"), SESSION_SCHEMA).alias("s")
    ).select("s.*")
    is_session: Column = F.lit(True)
    for name in REQUIRED_FIELDS:
        is_session = is_session & F.col(name).isNotNull()
    return parsed.withColumn("is_session", is_session)


def sessions_only(parsed: DataFrame) -> DataFrame:
    """The parsed records that are sessions, in `SESSION_SCHEMA` columns."""
    return parsed.where("is_session").select(*SESSION_SCHEMA.fieldNames())


def deduplicate(sessions: DataFrame) -> DataFrame:
    """One row per `session_id` (replays write identical copies, so any copy will do)."""
    return sessions.dropDuplicates(["session_id"])


def deduplicate_stream(sessions: DataFrame, watermark: str) -> DataFrame:
    """Streaming de-duplication, its state bounded by an event-time watermark on `first_ts`.

    Copies of a session share `first_ts`, so keying the state on
    (`session_id`, event time) lets Spark evict ids once the watermark passes
    them.  Records whose `first_ts` is older than the watermark (the largest
    `first_ts` seen minus `watermark`) are dropped by Spark and show up as
    `numRowsDroppedByWatermark` in the query's progress.
    """
    return (
        sessions.withColumn("event_time", F.timestamp_millis("first_ts"))
        .withWatermark("event_time", watermark)
        .dropDuplicates(["session_id", "event_time"])
        .drop("event_time")
    )


def _hour(first_ts: Column) -> Column:
    return F.timestamp_millis(first_ts - F.pmod(first_ts, F.lit(HOUR_MS)))


def hourly_figures(sessions: DataFrame) -> DataFrame:
    """Per (UTC hour of `first_ts`, site): the figures of `figures`, from de-duplicated sessions."""
    duration_ms = F.col("last_ts") - F.col("first_ts")
    site = F.when(F.col("site").isNull() | (F.col("site") == ""), F.lit(NO_SITE))
    return (
        sessions.select(
            _hour(F.col("first_ts")).alias("hour"),
            site.otherwise(F.col("site")).alias("site"),
            "key",
            "fragments",
            duration_ms.alias("duration_ms"),
        )
        .groupBy("hour", "site")
        .agg(
            F.count(F.lit(1)).alias("sessions"),
            F.countDistinct("key").alias("visitors"),
            (F.avg("duration_ms") / 1000).alias("mean_duration_s"),
            (F.percentile("duration_ms", F.lit(P95)) / 1000).alias("p95_duration_s"),
            F.avg("fragments").alias("pages_per_session"),
            F.avg((F.col("fragments") == 1).cast("double")).alias("bounce_rate"),
        )
        .orderBy("hour", "site")
    )


def top_landing_pages(sessions: DataFrame, top: int) -> DataFrame:
    """The `top` landing pages by sessions (ties by page), from de-duplicated sessions."""
    return (
        sessions.where(F.col("landing_page").isNotNull())
        .groupBy("landing_page")
        .agg(F.count(F.lit(1)).alias("sessions"))
        .orderBy(F.desc("sessions"), F.asc("landing_page"))
        .limit(top)
    )


def collect_aggregates(hourly: DataFrame, landing_pages: DataFrame) -> Aggregates:
    """Bring both (small) results to the driver as an `Aggregates`."""
    rows = (
        hourly.select(F.unix_millis("hour").alias("hour_ms"), "*")
        .orderBy("hour_ms", "site")
        .collect()
    )
    pages = landing_pages.orderBy(F.desc("sessions"), F.asc("landing_page")).collect()
    return Aggregates(
        rows=tuple(
            HourlyFigures(
                hour=datetime.fromtimestamp(row["hour_ms"] / 1000, tz=UTC),
                site=row["site"],
                sessions=row["sessions"],
                visitors=row["visitors"],
                mean_duration_s=row["mean_duration_s"],
                p95_duration_s=row["p95_duration_s"],
                pages_per_session=row["pages_per_session"],
                bounce_rate=row["bounce_rate"],
            )
            for row in rows
        ),
        top_landing_pages=tuple(LandingPage(p["landing_page"], p["sessions"]) for p in pages),
    )
