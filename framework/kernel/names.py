"""The app name every topic and znode of an app is built from, and its validation."""

from __future__ import annotations

import re
from typing import Final

from framework.kernel.errors import AppError, ConfigError

__all__ = ["MAX_APP_LENGTH", "InvalidAppName", "validate_app"]

# Kafka topic names are at most 249 characters; 200 leaves room for ".stream.NNNN" and
# ".deadletter" with any realistic stream count.
MAX_APP_LENGTH: Final = 200
# Legal in Kafka topic names, and none of them is special in a ZooKeeper path segment.
_APP_RE: Final = re.compile(r"[A-Za-z0-9._-]+")


class InvalidAppName(ConfigError, AppError):
    """The app name cannot be used in Kafka topic names and ZooKeeper paths."""

    def __init__(self, app: str, problem: str) -> None:
        self.problem = problem
        super().__init__(
            app,
            f"invalid app name {app!r}: {problem}; use 1-200 characters from "
            "[A-Za-z0-9._-] (set --app or SESSIONIZER_APP)",
        )


def validate_app(app: str) -> str:
    """Return the app name unchanged, or raise `InvalidAppName` saying what is wrong."""
    if not app:
        raise InvalidAppName(app, "it is empty")
    if len(app) > MAX_APP_LENGTH:
        raise InvalidAppName(app, f"it is longer than {MAX_APP_LENGTH} characters")
    if not _APP_RE.fullmatch(app):
        raise InvalidAppName(
            app, "it contains characters other than letters, digits, '.', '_', '-'"
        )
    if app in (".", ".."):
        # Both are reserved as ZooKeeper path segments (and as Kafka topic names).
        raise InvalidAppName(app, "'.' and '..' are reserved")
    return app
