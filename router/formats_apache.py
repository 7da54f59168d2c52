"""Parser for Apache "combined" access-log lines; key = "<client ip>|<user agent>"."""

from __future__ import annotations

import re
from datetime import timedelta, timezone
from urllib.parse import urlsplit

from router.errors import MalformedLine
from router.fragment import MONTHS, ParsedFragment, StatelessFormat, clock_time, epoch_ms
from router.memo import remember

__all__ = ["ApacheFormat", "parse_apache", "referrer_site"]

# A quoted field may contain backslash escapes (Apache writes `\"` inside the agent).  The
# loop is unrolled (runs of plain characters, then one escape and a run again): the same
# strings as `"((?:[^"\\]|\\.)*)"`, which tried an alternation at every character and
# made the line's match 7.7 of the parser's 15 µs a line (benchmarks/HOT_PATH.md, round 20).
_QUOTED = r'"([^"\\]*(?:\\.[^"\\]*)*)"'
_LINE_RE = re.compile(
    r"(?P<ip>\S+) \S+ \S+ \[(?P<time>[^\]]*)\] "
    rf"{_QUOTED} (?P<status>[0-9]{{3}}) (?P<bytes>[0-9]+|-) {_QUOTED} {_QUOTED}"
)
_REQUEST_RE = re.compile(r"(?P<method>[A-Za-z]+) (?P<path>\S(?:.*\S)?) (?P<protocol>HTTP/\S+)")
_TIME_RE = re.compile(
    r"(?P<day>[0-9]{2})/(?P<month>[A-Za-z]{3})/(?P<year>[0-9]{4})"
    r":(?P<hour>[0-9]{2}):(?P<minute>[0-9]{2}):(?P<second>[0-9]{2})"
    r" (?P<sign>[+-])(?P<off_h>[0-9]{2})(?P<off_m>[0-9]{2})"
)


_SITES: dict[str, str] = {}
"""Each referrer's site: a log's lines name a few hundred pages again and again (628 in the
10,000 lines of tests/data/apache_logs), and `urlsplit` was 0.8 µs a line."""


def referrer_site(referrer: str) -> str:
    """Return the lower-cased host of an absolute referrer URL, else "-"."""
    site = _SITES.get(referrer)
    if site is None:
        site = remember(_SITES, referrer, _site(referrer))
    return site


def _site(referrer: str) -> str:
    # "-" (no referrer) and relative referrers have no host; a malformed URL counts as none.
    try:
        host = urlsplit(referrer).hostname
    except ValueError:
        return "-"
    return host or "-"


_MIDNIGHTS: dict[str, int] = {}
"""Epoch ms of a day's 00:00:00 in a zone, by the time's "dd/Mon/yyyy" and "+zzzz": a log's
lines share a few days and one zone, and a fixed offset has no daylight saving, so a time is
its midnight plus its seconds, without a `datetime` and a `timezone` a line."""


def _parse_time(text: str) -> int:
    match = _TIME_RE.fullmatch(text)
    month = MONTHS.get(match["month"]) if match else None
    if match is None or month is None:
        raise MalformedLine("bad-timestamp", f"[{text}] is not dd/Mon/yyyy:HH:MM:SS +zzzz")
    hour, minute, second = int(match["hour"]), int(match["minute"]), int(match["second"])
    since_midnight = ((hour * 60 + minute) * 60 + second) * 1000
    day = text[:11] + text[21:]  # the regex fixes every width: "dd/Mon/yyyy" and "+zzzz"
    midnight = _MIDNIGHTS.get(day)
    if midnight is not None and hour < 24 and minute < 60 and second < 60:
        millis = midnight + since_midnight
        if millis >= 0:
            return millis
    millis = _exact_time(text, match, month)  # raises for a time that does not exist
    remember(_MIDNIGHTS, day, millis - since_midnight)
    return millis


def _exact_time(text: str, match: re.Match[str], month: int) -> int:
    """The time through `datetime`: `MalformedLine` for one that does not exist."""
    try:
        offset = timedelta(hours=int(match["off_h"]), minutes=int(match["off_m"]))
        zone = timezone(-offset if match["sign"] == "-" else offset)
        moment = clock_time(match, int(match["year"]), month, zone)
    except ValueError as exc:  # day 31 of a 30-day month, offset >= 24h, ...
        raise MalformedLine("bad-timestamp", f"[{text}]: {exc}") from exc
    return epoch_ms(moment)


def parse_apache(line: str) -> ParsedFragment:
    """Parse one combined-log-format line (trailing newline already removed)."""
    match = _LINE_RE.fullmatch(line)
    if match is None:
        raise MalformedLine("unparseable", "not in Apache combined log format")
    request, referrer, agent = match.group(3, 6, 7)
    parts = _REQUEST_RE.fullmatch(request)
    if parts is None:
        raise MalformedLine("bad-request", f"request {request[:80]!r} is not 'METHOD PATH HTTP/x'")
    timestamp_ms = _parse_time(match["time"])
    # Quoted fields are kept exactly as logged (escapes included), so the key is stable
    # whichever language a producer is written in.
    fields = {
        "ip": match["ip"],
        "method": parts["method"],
        "path": parts["path"],
        "protocol": parts["protocol"],
        "status": int(match["status"]),
        "bytes": 0 if match["bytes"] == "-" else int(match["bytes"]),
        "referrer": referrer,
        "agent": agent,
        "site": referrer_site(referrer),
    }
    return ParsedFragment(f"{match['ip']}|{agent}", timestamp_ms, fields)


class ApacheFormat(StatelessFormat):
    """The built-in `apache` format: `parse_apache` as a `router.Format`."""

    name = "apache"
    parse = staticmethod(parse_apache)
