"""structlog set-up: key-value events on stderr, JSON or console, every library's lines included.

The project logs through structlog. The libraries log through the standard
library: kazoo, kafka-python, py4j, warnings (`logging.captureWarnings`), and
librdkafka through the `logger` every confluent-kafka client is given
(`framework.kernel.kafka_settings.librdkafka_logger`). One handler renders their
records with the same renderer (`structlog.stdlib.ProcessorFormatter`), so a
JSON log stream stays JSON, one object a line. Libraries log from warning up
(from error up with level `error`).

A library repeats itself while a server is down (kafka-python and librdkafka
log every reconnect): a record whose logger and message template were already
printed within `REPEAT_INTERVAL_S` is counted, not printed. When its interval is
over (at the next library record, or when logging shuts down) one
`library_lines_suppressed` event says how many were left out (`suppressed`).
"""

from __future__ import annotations

import logging
import re
import sys
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TextIO, TypeVar

import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

from framework.kernel.errors import ConfigError
from framework.kernel.kafka_settings import LIBRDKAFKA_LOGGER

__all__ = [
    "LOG_FORMATS",
    "LOG_LEVELS",
    "REPEAT_INTERVAL_S",
    "SUPPRESSED_EVENT",
    "RepeatLimiter",
    "configure_logging",
    "library_handler",
]

LOG_FORMATS = ("json", "console")
"""`--log-format` choices; None (the default) takes JSON unless stderr is a terminal."""
LOG_LEVELS = ("debug", "info", "warning", "error")
"""`--log-level` choices."""
REPEAT_INTERVAL_S = 30.0
"""A library line repeated within this many seconds is counted instead of printed."""

SUPPRESSED_EVENT = "library_lines_suppressed"
"""The event that says how many repeats of a library line were left out (`suppressed`)."""
_Key = TypeVar("_Key", bound=Hashable)
_PLACEHOLDER = re.compile(r"%(?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?[sdifrxXeEgGc%]")
_DIGITS = re.compile(r"\d+")


def configure_logging(level: str = "info", log_format: str | None = None) -> None:
    """Configure structlog and the libraries' loggers for a command; stdout stays free."""
    numeric = _level(level)
    as_json = (not sys.stderr.isatty()) if log_format is None else _is_json(log_format)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            _renderer(as_json),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _LibraryHandler)]:
        root.removeHandler(old)
        old.close()  # prints what its limiter still counts
    handler = library_handler(sys.stderr, as_json=as_json)
    handler.setLevel(max(numeric, logging.WARNING))
    root.addHandler(handler)
    root.setLevel(max(numeric, logging.WARNING))
    # py4j logs every gateway call at debug and its connections at info.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    logging.captureWarnings(True)  # a DeprecationWarning is a line in the stream, not text


def library_handler(
    stream: TextIO,
    *,
    as_json: bool,
    interval: float = REPEAT_INTERVAL_S,
    clock: Callable[[], float] = time.monotonic,
) -> logging.Handler:
    """A handler rendering standard-library records as structlog events, repeats limited."""
    handler = _LibraryHandler(stream, RepeatLimiter[tuple[str, str]](interval, clock))
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=[
                structlog.stdlib.add_log_level,
                structlog.stdlib.add_logger_name,
                _library_fields,
                structlog.stdlib.ExtraAdder(allow=("suppressed", "template", "interval_s")),
                structlog.processors.TimeStamper(fmt="iso", utc=True),
                structlog.processors.format_exc_info,
            ],
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                _renderer(as_json),
            ],
            pass_foreign_args=True,
        )
    )
    return handler


@dataclass
class _Window:
    opened: float
    level: int
    suppressed: int = 0


class RepeatLimiter(Generic[_Key]):
    """Admits the first record of each key per `interval` seconds and counts the others."""

    def __init__(self, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self._clock = clock
        self._windows: dict[_Key, _Window] = {}

    def admit(self, key: _Key, level: int) -> bool:
        """Whether a record with this key is printed now (else it is counted).

        Call `expired` first: that is where a window whose interval is over closes.
        """
        window = self._windows.get(key)
        if window is None:
            self._windows[key] = _Window(self._clock(), level)
            return True
        window.suppressed += 1
        window.level = max(window.level, level)
        return False

    def expired(self) -> list[tuple[_Key, int, int]]:
        """(key, level, suppressed) of every window now over that left records out; forgets them."""
        now = self._clock()
        over = [key for key, w in self._windows.items() if now - w.opened >= self.interval]
        return self._take(over)

    def drain(self) -> list[tuple[_Key, int, int]]:
        """(key, level, suppressed) of every window that left records out, over or not."""
        return self._take(list(self._windows))

    def _take(self, keys: list[_Key]) -> list[tuple[_Key, int, int]]:
        windows = [(key, self._windows.pop(key)) for key in keys]
        return [(key, w.level, w.suppressed) for key, w in windows if w.suppressed]


class _LibraryHandler(logging.StreamHandler[TextIO]):
    """Writes library records through the formatter, each (logger, template) limited."""

    def __init__(self, stream: TextIO, limiter: RepeatLimiter[tuple[str, str]]) -> None:
        super().__init__(stream)
        self.limiter = limiter

    def emit(self, record: logging.LogRecord) -> None:
        # Called under the handler's lock (`Handler.handle`): the limiter needs no lock of its own.
        self._summarize(self.limiter.expired())
        if self.limiter.admit((record.name, _template(record)), record.levelno):
            super().emit(record)

    def close(self) -> None:
        """Say what is still counted, then close (also at exit, from `logging.shutdown`)."""
        self.acquire()
        try:
            self._summarize(self.limiter.drain())
        finally:
            self.release()
        super().close()

    def _summarize(self, counts: list[tuple[tuple[str, str], int, int]]) -> None:
        for (name, template), level, suppressed in counts:
            record = logging.LogRecord(name, level, __file__, 0, SUPPRESSED_EVENT, None, None)
            record.suppressed = suppressed
            record.template = template
            record.interval_s = self.limiter.interval
            super().emit(record)


def _template(record: logging.LogRecord) -> str:
    """The record's message template; for one of placeholders only (librdkafka's
    `%s [%s] %s`), its message with the numbers masked (ports, counts, durations)."""
    template = str(record.msg)
    if record.args and not re.search(r"[A-Za-z]", _PLACEHOLDER.sub("", template)):
        return _DIGITS.sub("#", record.getMessage())
    return template


def _library_fields(_logger: WrappedLogger, _name: str, event: EventDict) -> EventDict:
    """librdkafka's `%s [%s] %s` (facility, client, text) as keys of their own."""
    args = event.pop("positional_args", None)
    if event.get("logger") == LIBRDKAFKA_LOGGER and isinstance(args, tuple) and len(args) == 3:
        event.update(facility=str(args[0]), client=str(args[1]), event=str(args[2]))
    return event


def _renderer(as_json: bool) -> Processor:
    if as_json:
        return structlog.processors.JSONRenderer()
    return structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())


def _level(level: str) -> int:
    if level.lower() not in LOG_LEVELS:
        raise ConfigError(
            f"log level {level!r} is not one of {', '.join(LOG_LEVELS)} "
            "(--log-level / SESSIONIZER_LOG_LEVEL)"
        )
    return logging.getLevelNamesMapping()[level.upper()]


def _is_json(log_format: str) -> bool:
    if log_format not in LOG_FORMATS:
        raise ConfigError(
            f"log format {log_format!r} is not one of {', '.join(LOG_FORMATS)} "
            "(--log-format / SESSIONIZER_LOG_FORMAT)"
        )
    return log_format == "json"
