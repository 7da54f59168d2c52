"""Names of an app's Kafka topics (the app name itself is validated by `framework.kernel.names`)."""

from __future__ import annotations

import re

from framework.kernel.errors import InvalidArgument
from framework.kernel.names import validate_app

__all__ = [
    "deadletter_topic",
    "sessions_topic",
    "stream_index",
    "stream_name",
]

_STREAM_RE = re.compile(r"(?P<app>[A-Za-z0-9._-]+)\.stream\.(?P<index>[0-9]{4,})")


def stream_name(app: str, index: int) -> str:
    """Return the topic name of stream `index`: `<app>.stream.<index zero-padded to 4>`."""
    if index < 0:
        raise InvalidArgument(f"a stream index must be >= 0, got {index}")
    return f"{validate_app(app)}.stream.{index:04d}"


def stream_index(name: str, *, app: str | None = None) -> int:
    """Return the index of a stream topic name; `InvalidArgument` if it is not one (of `app`)."""
    match = _STREAM_RE.fullmatch(name)
    # Only canonical names round-trip: "x.stream.00012" is not what stream_name() writes.
    if match is None or f"{int(match['index']):04d}" != match["index"]:
        raise InvalidArgument(f"{name!r} is not a stream topic name (<app>.stream.<NNNN>)")
    if app is not None and match["app"] != app:
        raise InvalidArgument(f"{name!r} is not a stream of app {app!r}")
    return int(match["index"])


def sessions_topic(app: str) -> str:
    """Return the topic finished sessions are written to: `<app>.sessions`."""
    return f"{validate_app(app)}.sessions"


def deadletter_topic(app: str) -> str:
    """Return the dead-letter topic: `<app>.deadletter`."""
    return f"{validate_app(app)}.deadletter"
