"""`DeclarativeWebSessions`: `WebSessions` written as aggregates (sessionizer.declarative).

The same visits and the same result fields, in the same order, from the same fragments
(tests/unit/test_declarative_weblog.py compares the two on the real Apache log); the
per-fragment work runs without Python hooks.  Differences at the edges: `ip` is the
key's first part (`WebSessions` takes the fragment's `ip` when the key does not start
with it; the router's keys always do), and `landing_page` is the first page path
that is not None, where `WebSessions` takes the first one that is not empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sessionizer.declarative import (
    DeclarativeProcessor,
    count,
    field,
    first,
    last,
    sum_of,
)
from sessionizer.examples.weblog import ASSET_SUFFIXES

__all__ = ["ERROR", "PAGE", "DeclarativeWebSessions"]

ERROR = field("status") >= 400
"""A failed request."""
PAGE = (field("status") < 400) & ~field("path").ends_with(
    ASSET_SUFFIXES, ignore_case=True, cut_at="?"
)
"""A successful request for a page: `weblog.is_page` of its path, declared."""


class DeclarativeWebSessions(DeclarativeProcessor):
    """A visitor's visit, as `WebSessions` has it, declared: no Python per fragment."""

    timeout = 30 * 60
    grace = 2 * 60
    max_session_duration = 24 * 60 * 60
    aggregates = {
        "site": first("site"),
        "landing_page": first("path", where=PAGE),
        "exit_page": last("path", where=PAGE),
        "pages": count(where=PAGE),
        "requests": count(),
        "bytes": sum_of("bytes"),
        "errors": count(where=ERROR),
    }

    def finish(self, key: str, result: dict[str, Any]) -> Mapping[str, Any]:
        """Add the `ip` (the key's first part) and `bounce` (at most one page)."""
        result["ip"] = key.partition("|")[0]
        result["bounce"] = result["pages"] <= 1
        return result
