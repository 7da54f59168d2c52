"""A library repeating itself (Kafka down) logs one line per interval and a count, not hundreds.

No timing: the limiter's clock is a variable the test moves.
"""

from __future__ import annotations

import io
import json
import logging
from typing import Any

from framework.kernel.kafka_settings import LIBRDKAFKA_LOGGER
from framework.logging import RepeatLimiter, library_handler

INTERVAL = 30.0


class Clock:
    """A clock that moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _record(name: str, msg: str, *args: Any, level: int = logging.WARNING) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, args, None)


def _lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_the_limiter_admits_one_record_per_key_and_interval_and_counts_the_rest() -> None:
    clock = Clock()
    limiter = RepeatLimiter(INTERVAL, clock)
    assert limiter.admit("a", logging.WARNING)
    assert not limiter.admit("a", logging.ERROR)
    assert limiter.admit("b", logging.WARNING)  # another key has its own window
    clock.now += INTERVAL - 0.001
    assert limiter.expired() == []
    assert not limiter.admit("a", logging.WARNING)
    clock.now += 0.001
    assert limiter.expired() == [("a", logging.ERROR, 2)]  # b left nothing out: no summary
    assert limiter.admit("a", logging.WARNING)  # a new interval
    assert not limiter.admit("a", logging.WARNING)
    assert limiter.drain() == [("a", logging.WARNING, 1)]
    assert limiter.drain() == []


def test_582_reconnect_lines_become_one_line_and_a_count() -> None:
    clock, stream = Clock(), io.StringIO()
    handler = library_handler(stream, as_json=True, interval=INTERVAL, clock=clock)
    template = "%s: Connect attempt returned error %s. Disconnecting."
    for attempt in range(582):  # kafka-python, every ~50 ms while the broker is down
        clock.now += 0.05
        handler.handle(_record("kafka.conn", template, f"<conn {attempt}>", 111))
    handler.handle(_record("kazoo.client", "Connection dropped: %s", "refused"))
    assert [(line["logger"], line["event"]) for line in _lines(stream)] == [
        ("kafka.conn", "<conn 0>: Connect attempt returned error 111. Disconnecting."),
        ("kazoo.client", "Connection dropped: refused"),
    ]

    clock.now += INTERVAL
    handler.handle(_record("kazoo.client", "Connection dropped: %s", "refused"))
    summary, again = _lines(stream)[2:]
    assert summary["event"] == "library_lines_suppressed"
    assert summary["logger"] == "kafka.conn" and summary["suppressed"] == 581
    assert summary["template"] == template and summary["level"] == "warning"
    assert again["event"] == "Connection dropped: refused"


def test_what_is_still_counted_is_said_when_the_handler_closes() -> None:
    clock, stream = Clock(), io.StringIO()
    handler = library_handler(stream, as_json=True, interval=INTERVAL, clock=clock)
    for _ in range(3):
        handler.handle(_record("kazoo.client", "Connection dropped: %s", "refused"))
    handler.close()
    assert [line.get("suppressed") for line in _lines(stream)] == [None, 2]


def test_librdkafka_lines_are_keyed_by_their_text_with_numbers_masked() -> None:
    """confluent-kafka logs every line as `%s [%s] %s`: the template alone would merge them all."""
    clock, stream = Clock(), io.StringIO()
    handler = library_handler(stream, as_json=True, interval=INTERVAL, clock=clock)
    refused = "[thrd:127.0.0.1:{port}/bootstrap]: Connect failed (after {ms}ms in state CONNECT)"
    for ms in range(40):
        text = refused.format(port=9092, ms=ms)
        handler.handle(_record(LIBRDKAFKA_LOGGER, "%s [%s] %s", "FAIL", "rdkafka#producer-1", text))
    down = "1/1 brokers are down"
    handler.handle(_record(LIBRDKAFKA_LOGGER, "%s [%s] %s", "ERROR", "rdkafka#producer-1", down))
    first, second = _lines(stream)
    assert first["facility"] == "FAIL" and first["client"] == "rdkafka#producer-1"
    assert first["event"] == refused.format(port=9092, ms=0)
    assert (second["facility"], second["event"]) == ("ERROR", down)
    handler.close()
    assert _lines(stream)[-1]["suppressed"] == 39


def test_console_format_renders_library_records_for_people() -> None:
    stream = io.StringIO()
    handler = library_handler(stream, as_json=False, interval=INTERVAL, clock=Clock())
    handler.handle(_record("kazoo.client", "Connection dropped: %s", "refused"))
    line = stream.getvalue().strip()
    assert "Connection dropped: refused" in line and "kazoo.client" in line
    assert not line.startswith("{")
