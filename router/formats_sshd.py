"""Parser for sshd lines of a syslog auth log; key = "<host>:<sshd pid>"."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from router.errors import MalformedLine
from router.fragment import MONTHS, ParsedFragment, epoch_ms

__all__ = ["DEFAULT_SYSLOG_YEAR", "SshdFormat", "parse_sshd"]

DEFAULT_SYSLOG_YEAR = 2000
"""Year given to classic syslog timestamps, which carry none.

Fixed (not the current year) so that a replay gives the same event times on any
day; a leap year so that "Feb 29" parses.  Pass the log's real year when known.
"""

# Classic BSD syslog ("Mar 27 13:06:56 host tag[pid]: msg", day space-padded) or the
# RFC 3339 header newer rsyslog writes ("2024-03-27T13:06:56.123456+00:00 host ...").
_LINE_RE = re.compile(
    r"(?:(?P<month>[A-Z][a-z]{2}) {1,2}(?P<day>[0-9]{1,2})"
    r" (?P<hour>[0-9]{2}):(?P<minute>[0-9]{2}):(?P<second>[0-9]{2})"
    r"|(?P<iso>[0-9]{4}-[0-9]{2}-[0-9]{2}T\S+))"
    r" (?P<host>\S+) (?P<tag>[^\s\[:]+)(?:\[(?P<pid>[0-9]+)\])?: ?(?P<message>.*)"
)
# OpenSSH >= 9.8 logs per-connection work as "sshd-session".
_SSHD_TAGS = frozenset({"sshd", "sshd-session"})
# Where sshd names the account, in the order tried (first match wins):
# "Failed password for [invalid user] NAME from", "Invalid user NAME from",
# "invalid user NAME [preauth]", then "user NAME" / "user=NAME" (pam_unix).
_USER_RES = (
    re.compile(r"\bfor (?:invalid user )?(\S*) from "),
    re.compile(r"\b[Ii]nvalid user (\S*) (?:from |\[preauth\])"),
    re.compile(r"\buser[= ]([^\s(]+)"),  # "user NAME(uid=1000)" on newer pam: drop the uid
)
# The peer address follows "from", "by", "with" or "rhost="; "Server listening on
# 0.0.0.0" is deliberately not matched (that is our own address).
_IP_RE = re.compile(r"(?:\bfrom |\bby |\bwith |\brhost=)([0-9A-Fa-f.:]+)")


def _user(message: str) -> str | None:
    for pattern in _USER_RES:
        match = pattern.search(message)
        if match:
            return match[1]
    return None


def _ip(message: str) -> str | None:
    for match in _IP_RE.finditer(message):
        # Also try without trailing punctuation ("from 1.2.3.4: ...", "... 1.2.3.4.").
        for candidate in (match[1], match[1].rstrip(".:")):
            try:
                return str(ipaddress.ip_address(candidate))
            except ValueError:
                continue
    return None


def _timestamp(match: re.Match[str], year: int) -> int:
    try:
        if match["iso"] is not None:
            moment = datetime.fromisoformat(match["iso"])
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
        else:
            month = MONTHS.get(match["month"])
            if month is None:
                raise ValueError(f"unknown month {match['month']!r}")
            moment = datetime(
                year,
                month,
                int(match["day"]),
                int(match["hour"]),
                int(match["minute"]),
                int(match["second"]),
                tzinfo=UTC,
            )
    except ValueError as exc:  # "Feb 30", "Feb 29" in a common year, bad ISO text, ...
        raise MalformedLine("bad-timestamp", str(exc)) from exc
    return epoch_ms(moment)


def parse_sshd(line: str, *, year: int = DEFAULT_SYSLOG_YEAR) -> ParsedFragment:
    """Parse one auth-log line; classic syslog times are UTC in `year` (DEFAULT_SYSLOG_YEAR)."""
    match = _LINE_RE.fullmatch(line)
    if match is None:
        raise MalformedLine("unparseable", "not a syslog line")
    if match["tag"] not in _SSHD_TAGS or match["pid"] is None:
        raise MalformedLine("not-sshd", f"program {match['tag']!r} is not sshd[pid]")
    timestamp_ms = _timestamp(match, year)
    message = match["message"]
    fields = {
        "host": match["host"],
        "pid": int(match["pid"]),
        "message": message,
        # None: the message names no user / address ("" is a real, empty user name).
        "user": _user(message),
        "ip": _ip(message),
    }
    return ParsedFragment(f"{match['host']}:{match['pid']}", timestamp_ms, fields)


@dataclass(frozen=True)
class SshdFormat:
    """The built-in `sshd` format: `parse_sshd` in a fixed `year`, as a `router.formats.Format`."""

    year: int = DEFAULT_SYSLOG_YEAR
    name = "sshd"  # not a dataclass field: the same name in every year

    def parse(self, line: str) -> ParsedFragment:
        """Parse one auth-log line; classic syslog times are UTC in `self.year`."""
        return parse_sshd(line, year=self.year)
