"""Parsing Kafka's perf-test tools' output (benchmarks.broker_ceiling)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from benchmarks.broker_ceiling import (
    CONSUMER_CLASS,
    consumer_class,
    parse_consumer,
    parse_producer,
)

PRODUCER_OUTPUT = """\
SLF4J(W): No SLF4J providers were found.
148313 records sent, 29662.6 records/sec (8.49 MB/sec), 1024.3 ms avg latency, \
1873.0 ms max latency.
1000000 records sent, 152034.057311 records/sec (43.50 MB/sec), 512.33 ms avg latency, \
1873.00 ms max latency, 402 ms 50th, 1500 ms 95th, 1790 ms 99th, 1860 ms 99.9th.
"""

CONSUMER_OUTPUT = """\
start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, \
rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
2026-11-23 17:50:01:123, 2026-11-23 17:50:05:623, 286.1023, 63.5783, 1000064, 222236.4444, \
3012, 1488, 192.2731, 672086.0215
"""


def test_producer_summary_is_the_last_line_with_percentiles() -> None:
    result = parse_producer(PRODUCER_OUTPUT)
    assert result.records == 1_000_000
    assert result.records_per_s == pytest.approx(152034.057311)
    assert result.mb_per_s == pytest.approx(43.50)
    assert result.latency_avg_ms == pytest.approx(512.33)
    assert result.latency_p99_ms == pytest.approx(1790)


def test_producer_without_a_summary_is_an_error() -> None:
    with pytest.raises(ValueError, match="no ProducerPerformance summary"):
        parse_producer("Exception in thread main: TimeoutException\n")


def test_consumer_rate_counts_from_the_first_fetch() -> None:
    result = parse_consumer("some log line\n" + CONSUMER_OUTPUT)
    assert result.records == 1_000_064
    # fetch.nMsg.sec (group join excluded), not nMsg.sec
    assert result.records_per_s == pytest.approx(672086.0215)
    assert result.mb_per_s == pytest.approx(192.2731)
    assert result.seconds == pytest.approx(1.488)


def test_consumer_with_a_short_row_is_an_error() -> None:
    header = CONSUMER_OUTPUT.splitlines()[0]
    with pytest.raises(ValueError, match="no ConsumerPerformance summary"):
        parse_consumer(header + "\n2026-11-23, 2026-11-23, 1.0\n")


def _jar(path: Path, *classes: str) -> Path:
    with zipfile.ZipFile(path, "w") as jar:
        for name in classes:
            jar.writestr(name.replace(".", "/") + ".class", b"")
    return path


def test_consumer_class_follows_the_jar(tmp_path: Path) -> None:
    new = _jar(tmp_path / "new.jar", CONSUMER_CLASS)
    old = _jar(tmp_path / "old.jar", "org.apache.kafka.tools.ConsumerPerformance")
    assert consumer_class([new]) == CONSUMER_CLASS
    assert consumer_class([old]) == "org.apache.kafka.tools.ConsumerPerformance"
    with pytest.raises(RuntimeError, match="no ConsumerPerformance"):
        consumer_class([_jar(tmp_path / "none.jar", "org.example.Other")])
