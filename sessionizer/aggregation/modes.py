"""Run the aggregation once (a batch over the whole topic) or as a resumable streaming query.

Both modes end the same way (`publish`): figures from de-duplicated sessions,
written as Parquet under the output directory with a PNG chart beside them,
then collected as an `Aggregates`.  Layout of the output directory:

    hourly/                 Parquet: one row per (hour, site)
    top_landing_pages/      Parquet: the top landing pages
    sessions_per_hour.png   the chart
    stream/sessions/        streaming only: the de-duplicated sessions (Spark's file sink)
    stream/checkpoint/      streaming only: Kafka offsets and de-duplication state

The streaming query reads `<app>.sessions` with Spark's Kafka source, drops
duplicates under an event-time watermark and appends new sessions to
`stream/sessions` with Spark's exactly-once file sink; its checkpoint makes a
restart resume where the last committed batch ended, so nothing is lost or
counted twice.  The figures are then recomputed over that table, which is why
they are exact (distinct visitors, exact p95) and equal to `--once`'s, unless
sessions arrived more than the watermark delay late (counted, and reported).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from framework.kafka.consumer import assigned_consumer
from framework.kafka.errors import ClientError
from framework.kernel.lifecycle import Lifecycle
from sessionizer.aggregation.chart import write_chart
from sessionizer.aggregation.config import AggregateJob
from sessionizer.aggregation.errors import AggregationError, SessionsTopicError
from sessionizer.aggregation.figures import Aggregates
from sessionizer.aggregation.spark_job import (
    SESSION_SCHEMA,
    collect_aggregates,
    deduplicate,
    deduplicate_stream,
    hourly_figures,
    parse_records,
    read_sessions_batch,
    read_sessions_stream,
    sessions_only,
    top_landing_pages,
)
from sessionizer.aggregation.spark_session import stderr_line

__all__ = [
    "StreamCounters",
    "StreamingAggregation",
    "publish",
    "require_topic",
    "run_once",
    "run_streaming",
]

Say = Callable[[str], None]
_ADAPTIVE = "spark.sql.adaptive.enabled"


def require_topic(bootstrap: str, topic: str, properties: Mapping[str, str] | None = None) -> None:
    """Raise `SessionsTopicError` unless Kafka answers at `bootstrap` and `topic` exists."""
    try:
        consumer = assigned_consumer(
            bootstrap, "sessionizer-aggregate", properties or {}, bootstrap_timeout_ms=10_000
        )
        try:
            topics = consumer.topics()
        finally:
            consumer.close()
    except ClientError as exc:
        raise SessionsTopicError(f"cannot list the topics of Kafka at {bootstrap}: {exc}") from exc
    if topic not in topics:
        raise SessionsTopicError(
            f"topic {topic} does not exist on {bootstrap}: create the app's topics with "
            "`sessionizer streams create --count N` and run nodes to fill it"
        )


def publish(spark: SparkSession, sessions: DataFrame, job: AggregateJob, say: Say) -> Aggregates:
    """Figure de-duplicated `sessions`, write Parquet and the chart, return what was written."""
    hourly = hourly_figures(sessions)
    landing = top_landing_pages(sessions, job.top)
    written = []
    for frame, name in ((hourly, "hourly"), (landing, "top_landing_pages")):
        path = str(job.out / name)
        frame.coalesce(1).write.mode("overwrite").parquet(path)
        written.append(spark.read.schema(frame.schema).parquet(path))
    aggregates = collect_aggregates(*written)
    write_chart(aggregates, job.chart_path, title=f"{job.topic}: sessions per hour (UTC)")
    say(
        f"{aggregates.total_sessions} sessions in {len(aggregates.rows)} (hour, site) rows: "
        f"Parquet in {job.out}, chart {job.chart_path.name}"
    )
    return aggregates


def run_once(spark: SparkSession, job: AggregateJob, say: Say = stderr_line) -> Aggregates:
    """Batch: every record of `<app>.sessions` now, de-duplicated and figured."""
    require_topic(job.bootstrap, job.topic, job.kafka_config)
    say(f"reading {job.topic} from {job.bootstrap} (batch)")
    records = read_sessions_batch(spark, job.bootstrap, job.topic, job.kafka_config)
    parsed = parse_records(records).persist()
    try:
        count = parsed.count()
        skipped = parsed.where("NOT is_session").count()
        say(f"{count} records read, {skipped} not sessions (skipped)")
        return publish(spark, deduplicate(sessions_only(parsed)), job, say)
    finally:
        parsed.unpersist()


@dataclass
class StreamCounters:
    """What a streaming query did since it was started here, from its progress reports."""

    batches: int = 0
    records: int = 0
    late: int = 0
    last_batch: int = -1
    watermark: str = ""


class StreamingAggregation(Lifecycle):
    """The streaming query of one job: `start`, then `process_available`/`wait`, then `stop`.

    Use as a context manager (the query is stopped on exit, also on error);
    `aggregates()` recomputes and publishes the figures over the session table.
    """

    def __init__(
        self,
        spark: SparkSession,
        job: AggregateJob,
        *,
        available_now: bool = False,
        say: Say = stderr_line,
    ) -> None:
        self.spark = spark
        self.job = job
        self.available_now = available_now
        self.counters = StreamCounters()
        self._say = say
        self._query: StreamingQuery | None = None
        self._adaptive: str | None = None

    def start(self) -> StreamingAggregation:
        """Start (or resume from the checkpoint) the query."""
        require_topic(self.job.bootstrap, self.job.topic, self.job.kafka_config)
        resuming = (self.job.checkpoint / "commits").is_dir()
        records = read_sessions_stream(
            self.spark, self.job.bootstrap, self.job.topic, self.job.kafka_config
        )
        unique = deduplicate_stream(sessions_only(parse_records(records)), self.job.watermark)
        writer = (
            unique.writeStream.format("parquet")
            .option("path", str(self.job.session_table))
            .option("checkpointLocation", str(self.job.checkpoint))
            .outputMode("append")
        )
        if self.available_now:
            writer = writer.trigger(availableNow=True)
        # Adaptive execution does not apply to stateful streaming (Spark would warn and turn
        # it off itself); the query copies the session's settings on its own thread, so it
        # stays off until the query stops.
        self._adaptive = self.spark.conf.get(_ADAPTIVE)
        self.spark.conf.set(_ADAPTIVE, "false")
        try:
            self._query = writer.start()
        except BaseException:
            self._restore_adaptive()
            raise
        how = "resuming from" if resuming else "new checkpoint in"
        self._say(f"streaming {self.job.topic}: {how} {self.job.checkpoint}")
        return self

    @property
    def active(self) -> bool:
        """True while the query runs."""
        return self._query is not None and self._query.isActive

    def process_available(self) -> None:
        """Block until everything in the topic now is processed and committed."""
        self._guard(lambda query: query.processAllAvailable())

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the query ends (an available-now query ends by itself); True if it did."""
        seconds = None if timeout is None else max(1, math.ceil(timeout))
        ended = self._guard(lambda query: query.awaitTermination(seconds))
        return bool(ended) if timeout is not None else True

    def stop(self) -> None:
        """Stop the query (an interrupted batch is redone on restart: exactly-once sink)."""
        if self._query is not None:
            self._query.stop()
            self.report()
        self._restore_adaptive()

    def _restore_adaptive(self) -> None:
        if self._adaptive is not None:
            self.spark.conf.set(_ADAPTIVE, self._adaptive)
            self._adaptive = None

    def report(self) -> int:
        """Print a line per batch finished since the last call; return their input records."""
        if self._query is None:
            return 0
        new = 0
        for progress in self._query.recentProgress:
            if progress.batchId <= self.counters.last_batch:
                continue
            late = sum(op.numRowsDroppedByWatermark for op in progress.stateOperators)
            self.counters.batches += 1
            self.counters.records += progress.numInputRows
            self.counters.late += late
            self.counters.last_batch = progress.batchId
            watermark = progress.eventTime.get("watermark", "")
            self.counters.watermark = (
                "" if watermark.startswith("1970-01-01T00:00:00") else watermark
            )
            new += progress.numInputRows
            if progress.numInputRows or late:
                self._say(
                    f"batch {progress.batchId}: {progress.numInputRows} records, "
                    f"{late} later than the watermark (dropped), "
                    f"watermark {self.counters.watermark or 'not set yet'}"
                )
        return new

    def aggregates(self) -> Aggregates:
        """Figure the session table as committed so far, and publish it."""
        table = self.job.session_table
        if table.is_dir():
            sessions = self.spark.read.schema(SESSION_SCHEMA).parquet(str(table))
        else:
            sessions = self.spark.createDataFrame([], SESSION_SCHEMA)
        return publish(self.spark, deduplicate(sessions), self.job, self._say)

    def _guard(self, action: Callable[[StreamingQuery], object]) -> object:
        if self._query is None:
            raise AggregationError("the streaming query was not started: call start() first")
        try:
            result = action(self._query)
        except StreamingQueryException as exc:
            summary = str(exc).strip().splitlines()[0][:500]
            raise AggregationError(
                f"the streaming query over {self.job.topic} failed: {summary}; it resumes from "
                f"{self.job.checkpoint} when restarted"
            ) from exc
        self.report()
        return result

    def _open(self) -> None:
        self.start()

    def _close(self) -> None:
        self.stop()


def run_streaming(
    spark: SparkSession,
    job: AggregateJob,
    *,
    available_now: bool = False,
    until: Callable[[StreamCounters], bool] = lambda counters: False,
    refresh_seconds: float = 30.0,
    say: Say = stderr_line,
) -> Aggregates:
    """Run the streaming query until it ends (`available_now`) or `until(counters)` is true.

    `until` is asked about once a second, never from a signal handler.  While
    running, the figures are republished at most every `refresh_seconds` when
    new records came in; they are always published once more at the end.
    """
    with StreamingAggregation(spark, job, available_now=available_now, say=say) as stream:
        if available_now:
            stream.wait()
        else:
            published_at, published_records = time.monotonic(), 0
            while not until(stream.counters) and not stream.wait(timeout=1.0):
                due = time.monotonic() - published_at >= refresh_seconds
                if due and stream.counters.records > published_records:
                    published_records = stream.counters.records
                    stream.aggregates()
                    published_at = time.monotonic()
    counters = stream.counters
    say(
        f"streaming stopped after {counters.batches} batches: {counters.records} records, "
        f"{counters.late} later than the watermark"
    )
    return stream.aggregates()
