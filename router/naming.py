"""Names of an app's Kafka topics, and validation of the app name they are built from."""

from __future__ import annotations

import re

from router.errors import InvalidAppName

__all__ = [
    "MAX_APP_LENGTH",
    "deadletter_topic",
    "sessions_topic",
    "stream_index",
    "stream_name",
    "validate_app",
]

# Kafka topic names are at most 249 characters; 200 leaves room for ".stream.NNNN" and
# ".deadletter" with any realistic stream count.
MAX_APP_LENGTH = 200
# Legal in Kafka topic names, and none of them is special in a ZooKeeper path segment.
_APP_RE = re.compile(r"[A-Za-z0-9._-]+")
_STREAM_RE = re.compile(r"(?P<app>[A-Za-z0-9._-]+)\.stream\.(?P<index>[0-9]{4,})")


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


def stream_name(app: str, index: int) -> str:
    """Return the topic name of stream `index`: `<app>.stream.<index zero-padded to 4>`."""
    if index < 0:
        raise ValueError(f"a stream index must be >= 0, got {index}")
    return f"{validate_app(app)}.stream.{index:04d}"


def stream_index(name: str, *, app: str | None = None) -> int:
    """Return the index of a stream topic name; ValueError if it is not one (of `app`)."""
    match = _STREAM_RE.fullmatch(name)
    # Only canonical names round-trip: "x.stream.00012" is not what stream_name() writes.
    if match is None or f"{int(match['index']):04d}" != match["index"]:
        raise ValueError(f"{name!r} is not a stream topic name (<app>.stream.<NNNN>)")
    if app is not None and match["app"] != app:
        raise ValueError(f"{name!r} is not a stream of app {app!r}")
    return int(match["index"])


def sessions_topic(app: str) -> str:
    """Return the topic finished sessions are written to: `<app>.sessions`."""
    return f"{validate_app(app)}.sessions"


def deadletter_topic(app: str) -> str:
    """Return the dead-letter topic: `<app>.deadletter`."""
    return f"{validate_app(app)}.deadletter"
