"""`sessionizer aggregate`: the PySpark job over `<app>.sessions` on a real Kafka.

Sessions are written straight to `<app>.sessions` (with replayed duplicates and
a record that is not a session); every Spark result must equal, exactly, the
pure-Python reference over the de-duplicated sessions.  One SparkSession
(local[2]) serves the whole module; the CLI reuses it.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib import image as mpimg
from pyspark.sql import SparkSession

from framework.cli import main
from framework.cluster import resolve_artifacts
from framework.kernel.config import ConnectionConfig
from framework.provision import provision_streams
from framework.testing.aggregate import (
    PAGES,
    SITES,
    reference,
    replays,
    traffic,
    write,
)
from framework.testing.cli import cli
from framework.testing.nodes import SESSIONIZER
from sessionizer.aggregation.config import AggregateJob, SparkSettings
from sessionizer.aggregation.figures import HOUR_MS
from sessionizer.aggregation.modes import (
    StreamCounters,
    StreamingAggregation,
    run_once,
    run_streaming,
)
from sessionizer.aggregation.spark_session import kafka_source_jars, spark_session

pytestmark = pytest.mark.integration

ROW_FIELDS = {
    "hour",
    "site",
    "sessions",
    "visitors",
    "mean_duration_s",
    "p95_duration_s",
    "pages_per_session",
    "bounce_rate",
}


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    """One small local Spark for the module, stopped (with its JVM) at the end."""
    jars = kafka_source_jars(resolve_artifacts().spark)
    settings = SparkSettings(master="local[2]", jars=jars, driver_memory="512m", ui=False)
    with spark_session(settings) as session:
        yield session


@pytest.fixture
def topic(zk_hosts: str, kafka_bootstrap: str, app: str) -> str:
    """The app's topics, provisioned as `streams create --count 1` does."""
    provision_streams(ConnectionConfig(zk_hosts, kafka_bootstrap, app), 1)
    return f"{app}.sessions"


def test_once_gives_the_reference_figures_of_the_deduplicated_sessions(
    spark: SparkSession, kafka_bootstrap: str, topic: str, tmp_path: Path
) -> None:
    sessions = traffic(1, 400, prefix="s")
    records: list[dict[str, Any] | bytes] = [*sessions, *replays(sessions, 7)]
    records += [b"not json", {"session_id": "partial", "key": "k"}, *replays(sessions, 50)]
    write(kafka_bootstrap, topic, records)

    figures = run_once(spark, AggregateJob(kafka_bootstrap, topic, tmp_path / "out"))

    assert figures == reference(records)
    assert figures.total_sessions == len(sessions) < len(records)
    assert {row.site for row in figures.rows} == set(SITES)  # "-" includes no-site sessions
    assert len(figures.top_landing_pages) == len(PAGES)


def test_streaming_stopped_and_restarted_counts_like_once(
    spark: SparkSession, kafka_bootstrap: str, topic: str, tmp_path: Path
) -> None:
    sessions = traffic(2, 360, prefix="s")
    first = [*sessions[:180], *replays(sessions[:180], 9)]
    rest = [*sessions[180:], *replays(sessions[:180], 5), *replays(sessions[180:], 4)]
    job = AggregateJob(kafka_bootstrap, topic, tmp_path / "stream-out")

    write(kafka_bootstrap, topic, first)
    with StreamingAggregation(spark, job) as stream:
        stream.process_available()
        assert stream.aggregates() == reference(first)
    assert not stream.active

    write(kafka_bootstrap, topic, rest)
    with StreamingAggregation(spark, job) as stream:
        stream.process_available()
        streamed = stream.aggregates()
        # Resumed from the checkpoint: only the new records were read.
        assert stream.counters.records == len(rest)
        assert stream.counters.late == 0

    once = run_once(spark, AggregateJob(kafka_bootstrap, topic, tmp_path / "once-out"))
    assert streamed == once == reference(first + rest)
    assert once.total_sessions == len(sessions)


def until(
    condition: Callable[[StreamCounters], bool], within: float = 120.0
) -> Callable[[StreamCounters], bool]:
    """Stop a streaming run when `condition` holds; past the deadline, stop and fail."""
    deadline = time.monotonic() + within

    def check(counters: StreamCounters) -> bool:
        assert time.monotonic() < deadline, f"streaming did not get there: {counters}"
        return condition(counters)

    return check


def test_sessions_later_than_the_watermark_are_dropped_and_reported(
    spark: SparkSession, kafka_bootstrap: str, topic: str, tmp_path: Path
) -> None:
    early = traffic(4, 120, prefix="e")
    newest = max(s["first_ts"] for s in early)
    job = AggregateJob(kafka_bootstrap, topic, tmp_path / "out", watermark="1 hour")
    lines: list[str] = []

    write(kafka_bootstrap, topic, early)
    # Run until a batch has used the advanced watermark (so the checkpoint holds it), then stop.
    advanced = until(lambda c: c.records == len(early) and bool(c.watermark))
    run_streaming(spark, job, until=advanced, say=lines.append)

    too_late = {**early[0], "session_id": "late", "first_ts": newest - 3 * HOUR_MS}
    too_late["last_ts"] = too_late["first_ts"] + 1000
    in_time = {**early[1], "session_id": "in-time", "first_ts": newest, "last_ts": newest + 1000}
    write(kafka_bootstrap, topic, [too_late, in_time])
    figures = run_streaming(spark, job, until=until(lambda c: c.records == 2), say=lines.append)

    assert figures == reference([*early, in_time])
    summary = [line for line in lines if line.startswith("streaming stopped")][-1]
    assert summary.endswith(": 2 records, 1 later than the watermark"), lines


def test_cli_json_parquet_and_chart(
    spark: SparkSession, zk_hosts: str, kafka_bootstrap: str, app: str, topic: str, tmp_path: Path
) -> None:
    sessions = traffic(3, 250, prefix="c")
    records = [*sessions, *replays(sessions, 3)]
    write(kafka_bootstrap, topic, records)
    out = tmp_path / "cli-out"
    common = ("--master", "local[2]", "--out", str(out), "--json")

    code, stdout, stderr = cli(
        "aggregate", "--once", *common, zk=zk_hosts, bootstrap=kafka_bootstrap, app=app
    )

    assert code == 0, stderr
    document = json.loads(stdout.strip().splitlines()[-1])
    assert set(document) == {"rows", "top_landing_pages"}
    assert document["rows"] and all(set(row) == ROW_FIELDS for row in document["rows"])
    hours = [datetime.fromisoformat(row["hour"]) for row in document["rows"]]
    assert all(h.utcoffset() is not None and h.utcoffset().total_seconds() == 0 for h in hours)
    assert document == json.loads(json.dumps(reference(records).to_json()))
    assert "records read" in stderr  # progress lines go to stderr

    hourly = spark.read.parquet(str(out / "hourly"))
    assert hourly.count() == len(document["rows"])
    assert sorted(hourly.columns) == sorted(ROW_FIELDS)
    chart = out / "sessions_per_hour.png"
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert chart.stat().st_size > 10_000
    pixels = mpimg.imread(chart)
    assert pixels.shape[0] > 300 and pixels.shape[1] > 600
    assert float(np.std(pixels[..., :3])) > 0.05  # drawn, not a blank canvas

    # The streaming mode through the CLI (process what is there, then stop) agrees.
    code, stdout, stderr = cli(
        "aggregate", "--available-now", *common, zk=zk_hosts, bootstrap=kafka_bootstrap, app=app
    )
    assert code == 0, stderr
    assert json.loads(stdout.strip().splitlines()[-1]) == document


# Opt-in (`-m slow`, CI time): the same figures are checked in-process by
# test_once_gives_the_reference_figures_of_the_deduplicated_sessions.
@pytest.mark.slow
def test_console_script_in_a_fresh_process(
    zk_hosts: str, kafka_bootstrap: str, app: str, topic: str, tmp_path: Path
) -> None:
    sessions = traffic(5, 120, prefix="p")
    write(kafka_bootstrap, topic, [*sessions, *replays(sessions, 4)])
    command = [SESSIONIZER, "aggregate", "--once", "--master", "local[2]", "--json"]
    command += ["--out", str(tmp_path / "out"), "--app", app]
    environment = {
        **os.environ,
        "SESSIONIZER_ZK": zk_hosts,
        "SESSIONIZER_BOOTSTRAP": kafka_bootstrap,
    }

    done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=300)

    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == json.loads(json.dumps(reference(sessions).to_json()))
    assert "aggregate: Spark started in" in done.stderr
    assert " INFO " not in done.stderr  # Spark's own logging is turned down


def test_missing_topic_is_a_clear_error_before_spark_starts(
    zk_hosts: str, kafka_bootstrap: str, app: str, tmp_path: Path
) -> None:
    code, _, stderr = cli(
        "aggregate",
        "--once",
        "--out",
        str(tmp_path),
        zk=zk_hosts,
        bootstrap=kafka_bootstrap,
        app=app,
    )
    assert code == 2
    assert f"topic {app}.sessions does not exist" in stderr


def test_help_shows_each_flag_and_its_environment_variable(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        main(["aggregate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag in ("--once", "--available-now", "--master", "--out", "--watermark", "--json"):
        assert flag in text
    for variable in ("SPARK_MASTER", "AGGREGATE_OUT", "AGGREGATE_WATERMARK", "BOOTSTRAP"):
        assert f"[env: SESSIONIZER_{variable}]" in text
