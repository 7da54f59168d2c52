"""`WebSessions`: visits to a web site, from Apache access-log fragments (format `apache`).

The key is `"<client ip>|<user agent>"` (set by the router).  A visit ends after
30 minutes without a request, or 24 hours after it began; requests may arrive up
to 2 minutes late.
Result fields: ip, site (the referrer host the visit came from, "-" if none),
landing_page, exit_page, pages (successful non-asset requests), requests, bytes,
errors (status >= 400) and bounce (at most one page).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sessionizer.processor import StreamProcessor

__all__ = ["ASSET_SUFFIXES", "WebSessions", "is_page"]

ASSET_SUFFIXES = (
    ".css",
    ".js",
    ".png",
    ".jpg",
    ".jpeg",
    ".gif",
    ".ico",
    ".svg",
    ".woff",
    ".woff2",
    ".ttf",
    ".eot",
    ".map",
)
"""Paths ending like this are page resources, not pages (compared case-insensitively)."""


def is_page(path: str) -> bool:
    """Return True if a request path names a page rather than an asset."""
    return not path.split("?", 1)[0].lower().endswith(ASSET_SUFFIXES)


class WebSessions(StreamProcessor[dict[str, Any]]):
    """A visitor's visit: pages, landing and exit page, referrer site, bytes, bounce."""

    timeout = 30 * 60
    grace = 2 * 60
    max_session_duration = 24 * 60 * 60  # a feed poller never times out: split it daily

    def open(self, key: str, fragment: Mapping[str, Any]) -> dict[str, Any]:
        """Start a visit; its site is where its first request was referred from."""
        return {
            "ip": fragment["ip"],
            "site": fragment["site"],
            "landing_page": None,
            "exit_page": None,
            "pages": 0,
            "requests": 0,
            "bytes": 0,
            "errors": 0,
        }

    def update(self, session: dict[str, Any], fragment: Mapping[str, Any]) -> None:
        """Count one request."""
        session["requests"] += 1
        session["bytes"] += fragment["bytes"]
        if fragment["status"] >= 400:
            session["errors"] += 1
        elif is_page(fragment["path"]):
            session["pages"] += 1
            session["landing_page"] = session["landing_page"] or fragment["path"]
            session["exit_page"] = fragment["path"]

    def close(self, key: str, session: dict[str, Any]) -> dict[str, Any]:
        """Return the visit, with `bounce` set when it saw at most one page."""
        return {**session, "bounce": session["pages"] <= 1}
