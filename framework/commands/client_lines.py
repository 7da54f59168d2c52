"""The Kafka and ZooKeeper clients' own lines in a one-shot command, and their errors in one.

A command that reads the cluster once (`status`, `sessions`, `deadletters`, `streams`)
says in one line what it could not reach; the clients' own loggers would
repeat it once per retry, so they are silenced for it unless `--log-level debug`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["CLIENT_LOGGERS", "clients_quiet", "first_line"]

CLIENT_LOGGERS = ("kafka", "kazoo", "librdkafka")
"""kafka-python's, kazoo's and librdkafka's (`framework.kernel.kafka_settings`) loggers."""


@contextmanager
def clients_quiet(quiet: bool) -> Iterator[None]:
    """Silence the clients' loggers while the block runs (when `quiet`)."""
    loggers = [logging.getLogger(name) for name in CLIENT_LOGGERS] if quiet else []
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def first_line(exc: BaseException, limit: int = 200) -> str:
    """An exception's type and first line, cut: kafka-python's can hold a whole request dump."""
    lines = str(exc).strip().splitlines()
    name = getattr(exc, "client_class", "") or type(exc).__name__  # a mapped error: the client's
    text = name if not lines else lines[0] if lines[0].startswith(name) else f"{name}: {lines[0]}"
    return text if len(text) <= limit else text[: limit - 3] + "..."
