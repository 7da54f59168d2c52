"""`configure_logging`: the project's events and every library's records in one format."""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Iterator

import pytest
import structlog

from framework.kernel.errors import ConfigError
from framework.kernel.kafka_settings import LIBRDKAFKA_LOGGER, librdkafka_logger
from framework.logging import configure_logging


class Stderr:
    """What the test wrote to stderr (pytest's capture, which replaces `sys.stderr`)."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self._capsys = capsys

    def getvalue(self) -> str:
        return self._capsys.readouterr().err


@pytest.fixture
def stderr(capsys: pytest.CaptureFixture[str]) -> Iterator[Stderr]:
    """The captured stderr; the logging set-up of the process is put back afterwards."""
    root = logging.getLogger()
    handlers, level, config = list(root.handlers), root.level, structlog.get_config()
    yield Stderr(capsys)
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    root.setLevel(level)
    logging.captureWarnings(False)
    structlog.configure(**config)


def test_every_line_is_json_when_asked_or_when_stderr_is_no_terminal(stderr: Stderr) -> None:
    configure_logging("info")  # a StringIO is no terminal: JSON
    structlog.get_logger().info("node_started", app="shop")
    logging.getLogger("kazoo.client").warning("Connection dropped: %s", "socket closed")
    logging.getLogger("kafka.conn").info("Probing node %s", 1)  # libraries: warning and up
    librdkafka_logger().error("%s [%s] %s", "FAIL", "rdkafka#consumer-1", "Connect failed")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        # pytest records each test's warnings itself (its own showwarning): put logging's
        # hook, the one configure_logging installed, over it for this block.
        logging.captureWarnings(False)
        logging.captureWarnings(True)
        warnings.warn("old API", DeprecationWarning, stacklevel=1)
    lines = [json.loads(line) for line in stderr.getvalue().splitlines()]
    assert [(line.get("logger"), line["event"]) for line in lines[:3]] == [
        (None, "node_started"),
        ("kazoo.client", "Connection dropped: socket closed"),
        (LIBRDKAFKA_LOGGER, "Connect failed"),
    ]
    assert lines[2]["facility"] == "FAIL" and lines[2]["level"] == "error"
    assert lines[3]["logger"] == "py.warnings" and "old API" in lines[3]["event"]
    assert len(lines) == 4 and all("timestamp" in line for line in lines)


def test_console_format_is_for_people(stderr: Stderr) -> None:
    configure_logging("info", "console")
    structlog.get_logger().info("node_started", app="shop")
    logging.getLogger("kazoo.client").warning("Connection dropped")
    lines = stderr.getvalue().splitlines()
    assert len(lines) == 2 and not any(line.startswith("{") for line in lines)
    assert "node_started" in lines[0] and "Connection dropped" in lines[1]


def test_configuring_again_replaces_the_handler_and_says_what_it_counted(
    stderr: Stderr,
) -> None:
    configure_logging("info", "json")
    for _ in range(3):
        logging.getLogger("kazoo.client").warning("Connection dropped")
    configure_logging("error", "json")
    logging.getLogger("kazoo.client").warning("Connection dropped")  # below error: not shown
    structlog.get_logger().warning("not shown either")
    lines = [json.loads(line) for line in stderr.getvalue().splitlines()]
    assert [line.get("suppressed") for line in lines] == [None, 2]
    ours = [h for h in logging.getLogger().handlers if type(h).__name__ == "_LibraryHandler"]
    assert len(ours) == 1


@pytest.mark.parametrize(
    ("level", "log_format", "named"),
    [("loud", None, "SESSIONIZER_LOG_LEVEL"), ("info", "xml", "SESSIONIZER_LOG_FORMAT")],
)
def test_a_bad_level_or_format_is_a_config_error(
    stderr: Stderr, level: str, log_format: str | None, named: str
) -> None:
    with pytest.raises(ConfigError, match=named):
        configure_logging(level, log_format)
