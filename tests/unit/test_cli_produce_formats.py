"""`produce` with the wrong --format: refused in one line that names the formats that fit;
with times in seconds: one warning."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import structlog
from structlog.testing import capture_logs

import router.ingest as ingest
import router.producer as producer_module
from framework.kernel.errors import SessionizerError
from framework.testing.cli import DATA
from framework.testing.producer import RecordingTransport
from router.ingest import produce_lines
from router.producer import ProducerConfig, StreamProducer

ACCESS_LOG = DATA / "apache_logs"
AUTH_LOG = DATA / "auth.log"


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordingTransport]:
    fake = RecordingTransport()
    monkeypatch.setattr(producer_module, "open_transport", lambda config, topics: fake)
    yield fake


@pytest.fixture(autouse=True)
def _debug_logging() -> Iterator[None]:
    """Debug events reach `capture_logs`, whatever an earlier test configured."""
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    yield
    structlog.configure(**saved)


def _lines(path: object, count: int) -> list[str]:
    with open(path, encoding="utf-8", errors="replace") as handle:  # type: ignore[call-overload]
        return [next(handle) for _ in range(count)]


def test_an_access_log_read_as_sshd_is_refused_naming_apache(sent: RecordingTransport) -> None:
    producer = StreamProducer(ProducerConfig("b:1", "app", 4))
    with capture_logs() as logs, pytest.raises(SessionizerError) as refused:
        produce_lines(producer, _lines(ACCESS_LOG, 500), "sshd", end_of_input=True)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith("none of the 500 lines parsed as sshd (unparseable=500)")
    assert "--format apache" in message
    assert sent.records == []  # not even the end-of-input watermark
    # Each line at debug, one summary per reason at info.
    assert [e["log_level"] for e in logs if e["event"] == "line_rejected"] == ["debug"] * 500
    summary = [e for e in logs if e["event"] == "lines_rejected"]
    assert [(e["log_level"], e["reason"], e["lines"]) for e in summary] == [
        ("info", "unparseable", 500)
    ]


def test_a_partly_parsed_input_is_no_error(sent: RecordingTransport) -> None:
    producer = StreamProducer(ProducerConfig("b:1", "app", 4))
    lines = [*_lines(ACCESS_LOG, 5), "garbage\n"]
    stats = produce_lines(producer, lines, "apache", end_of_input=True)
    assert (stats.parsed, stats.rejected) == (5, 1)
    assert len(sent.records) > 5  # the fragments and the end-of-input watermarks


def test_no_suggestion_when_no_built_in_format_fits(sent: RecordingTransport) -> None:
    producer = StreamProducer(ProducerConfig("b:1", "app", 4))
    with pytest.raises(SessionizerError, match=r"check --format \(docs/routing.md\)"):
        produce_lines(producer, ["nothing\n", "at all\n"], "apache")


def test_formats_that_parse_the_first_lines() -> None:
    assert ingest.formats_that_parse(_lines(ACCESS_LOG, 20)) == ["apache"]
    assert ingest.formats_that_parse(_lines(AUTH_LOG, 50))[0] == "sshd"
    assert ingest.formats_that_parse(['{"key": "k", "ts": 1000}']) == ["jsonl"]
    assert ingest.formats_that_parse(["no format at all"]) == []


def _seconds_lines(count: int) -> list[str]:
    return [f'{{"key": "u1", "ts": {1700000000 + 60 * n}, "page": "/p"}}\n' for n in range(count)]


def test_times_given_in_seconds_are_sent_with_one_warning_naming_the_unit(
    sent: RecordingTransport,
) -> None:
    producer = StreamProducer(ProducerConfig("b:1", "app", 4))
    with capture_logs() as logs:
        stats = produce_lines(producer, ["", *_seconds_lines(3)], "jsonl")
    assert stats.parsed == 3  # sent: the times are valid, only suspicious
    warnings = [e for e in logs if e["event"] == "event_time_near_epoch"]
    assert len(warnings) == 1, warnings
    (warning,) = warnings
    assert warning["log_level"] == "warning"
    assert warning["line"] == 2 and warning["timestamp_ms"] == 1700000000
    assert warning["time"] == "1970-01-20T16:13:20Z"
    assert "milliseconds" in warning["note"] and "seconds" in warning["note"]


def test_times_in_milliseconds_give_no_warning(sent: RecordingTransport) -> None:
    producer = StreamProducer(ProducerConfig("b:1", "app", 4))
    lines = [f'{{"key": "u1", "ts": {1700000000000 + n}}}\n' for n in range(3)]
    with capture_logs() as logs:
        produce_lines(producer, lines, "jsonl")
    assert [e for e in logs if e["event"] == "event_time_near_epoch"] == []
