"""`WebSessions`: visits to a web site, from Apache access-log fragments (format `apache`).

The key is `"<client ip>|<user agent>"` (set by the router).  A visit ends after
30 minutes without a request, or 24 hours after it began; requests may arrive up
to 2 minutes late.
Result fields: ip, site (the referrer host the visit came from, "-" if none),
landing_page, exit_page, pages (successful non-asset requests), requests, bytes,
errors (status >= 400) and bounce (at most one page).

An open visit is a `Visit`: slots rather than a dict (104 bytes against 272 per open
session), with a dict's face (`session["pages"]`, extra keys) for subclasses.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any, Final

import msgpack

from sessionizer.processor import StreamProcessor

__all__ = ["ASSET_SUFFIXES", "Visit", "WebSessions", "is_page"]

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


_FIELDS: Final = ("site", "landing_page", "exit_page", "pages", "requests", "bytes", "errors")


class Visit(MutableMapping[str, Any]):
    """One open visit: its counters in slots; `ip` (when the key does not start with it)
    and any key a subclass adds in `extra`.

    A mapping over the result fields and the extra keys, so that code written for the
    dict state this replaced still works.
    """

    __slots__ = (*_FIELDS, "extra")

    def __init__(self, site: Any) -> None:
        self.site = site
        self.landing_page: Any = None
        self.exit_page: Any = None
        self.pages = self.requests = self.errors = 0
        self.bytes: Any = 0
        # Rare (a subclass's keys, an ip the key does not hold): one slot for all of it.
        self.extra: dict[str, Any] | None = None

    def __getitem__(self, name: str) -> Any:
        if name in _FIELDS:
            return getattr(self, name)
        if self.extra is None or name not in self.extra:
            raise KeyError(name)
        return self.extra[name]

    def __setitem__(self, name: str, value: Any) -> None:
        if name in _FIELDS:
            setattr(self, name, value)
        else:
            if self.extra is None:
                self.extra = {}
            self.extra[name] = value

    def __delitem__(self, name: str) -> None:
        if name in _FIELDS:
            raise KeyError(f"{name} is a field of every visit")
        if self.extra is None or name not in self.extra:
            raise KeyError(name)
        del self.extra[name]

    def __iter__(self) -> Iterator[str]:
        yield from _FIELDS
        if self.extra:
            yield from self.extra

    def __len__(self) -> int:
        return len(_FIELDS) + len(self.extra or ())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Visit) and self.dump() == other.dump()

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dict it replaced

    def dump(self) -> list[Any]:
        """The visit as msgpack-able data (a handover): the fields, the ip, the extra keys."""
        extra = self.extra or {}
        # Extra values must come back exactly as they were: exact msgpack types only.
        msgpack.packb(extra, use_bin_type=True, strict_types=True)
        return [[getattr(self, name) for name in _FIELDS], extra]

    @classmethod
    def load(cls, data: list[Any]) -> Visit:
        """Rebuild a visit from `dump`'s data."""
        values, extra = data
        visit = cls(values[0])
        for name, value in zip(_FIELDS[1:], values[1:], strict=True):
            setattr(visit, name, value)
        visit.extra = extra or None
        return visit


class WebSessions(StreamProcessor[Visit]):
    """A visitor's visit: pages, landing and exit page, referrer site, bytes, bounce."""

    timeout = 30 * 60
    grace = 2 * 60
    max_session_duration = 24 * 60 * 60  # a feed poller never times out: split it daily
    version = 2
    """The state format: 2 is `Visit` (1, unnamed, was a dict); a handover of 1 replays."""

    def open(self, key: str, fragment: Mapping[str, Any]) -> Visit:
        """Start a visit; its site is where its first request was referred from."""
        ip = fragment["ip"]
        # The router's key starts with the ip: an open visit need not hold it twice (a
        # string per open session); `close` takes it from the key then.
        visit = Visit(_shared(fragment["site"]))
        if not (type(ip) is str and key.partition("|")[0] == ip):
            visit["ip"] = ip
        return visit

    def update(self, session: Visit, fragment: Mapping[str, Any]) -> None:
        """Count one request."""
        session.requests += 1
        session.bytes += fragment["bytes"]
        if fragment["status"] >= 400:
            session.errors += 1
        elif is_page(fragment["path"]):
            path = _shared(fragment["path"])
            session.pages += 1
            session.landing_page = session.landing_page or path
            session.exit_page = path

    def close(self, key: str, session: Visit) -> dict[str, Any]:
        """Return the visit, with `bounce` set when it saw at most one page."""
        result = {
            "site": session.site,
            "landing_page": session.landing_page,
            "exit_page": session.exit_page,
            "pages": session.pages,
            "requests": session.requests,
            "bytes": session.bytes,
            "errors": session.errors,
            "ip": key.partition("|")[0],
        }
        if session.extra:  # an ip of its own, a subclass's keys
            result.update(session.extra)
        result["bounce"] = session.pages <= 1
        return result

    def dump_session(self, session: Visit) -> Any:
        """The visit as msgpack-able data, for a handover."""
        return session.dump()

    def load_session(self, data: Any) -> Visit:
        """Rebuild a visit from `dump_session`'s data."""
        return Visit.load(data)


def _shared(value: Any) -> Any:
    """One string object for equal sites and paths: open sessions share the few there are."""
    # Only exact str can be interned; anything else is kept as it came.
    return sys.intern(value) if type(value) is str else value
