"""Parser for sshd lines of a syslog auth log; key = "<host>:<sshd pid>".

Classic syslog times carry no year. One line is dated in a year given to it
(`parse_sshd`, `SshdFormat.parse`); the lines of one log read in order
(`SshdFormat.reader`, what `produce` and `parse_file` use) start in a given year
and move to the next one where the months step back (Dec -> Jan). `log_year`
tells the first line's year from the file's modification time.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from router.errors import MalformedLine
from router.fragment import MONTHS, ParsedFragment, clock_time, epoch_ms
from router.memo import remember

__all__ = ["DEFAULT_SYSLOG_YEAR", "SshdFormat", "SyslogYears", "log_year", "parse_sshd"]

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
# Two phrases say "user" without naming one: "disconnected by user [preauth]" (the
# client hung up) and pam's "check pass; user unknown" (no such account).
_USER_RES = (
    re.compile(r"\bfor (?:invalid user )?(\S*) from "),
    re.compile(r"\b[Ii]nvalid user (\S*) (?:from |\[preauth\])"),
    # "user NAME(uid=1000)" on newer pam: drop the uid.
    re.compile(r"(?<!disconnected by )(?<!check pass; )\buser[= ]([^\s(]+)"),
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
            address = _ADDRESSES.get(candidate)
            if address is None:
                address = remember(_ADDRESSES, candidate, _address(candidate))
            if address:
                return address
    return None


_ADDRESSES: dict[str, str] = {}
"""Each candidate's address in its standard form, "" for none: a log names a few hundred
peers again and again (tests/data/auth.log: 202 in 2,785 candidates), and `ipaddress`
cost 3.1 µs a message."""


def _address(candidate: str) -> str:
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        return ""


def _timestamp(match: re.Match[str], year_of: Callable[[int], int]) -> int:
    try:
        if match["iso"] is not None:
            moment = datetime.fromisoformat(match["iso"])
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
        else:
            month = MONTHS.get(match["month"])
            if month is None:
                raise MalformedLine("bad-timestamp", f"unknown month {match['month']!r}")
            moment = clock_time(match, year_of(month), month, UTC)
    except ValueError as exc:  # "Feb 30", "Feb 29" in a common year, bad ISO text, ...
        raise MalformedLine("bad-timestamp", str(exc)) from exc
    return epoch_ms(moment)


def parse_sshd(line: str, *, year: int = DEFAULT_SYSLOG_YEAR) -> ParsedFragment:
    """Parse one auth-log line; classic syslog times are UTC in `year` (DEFAULT_SYSLOG_YEAR)."""
    return _parse(line, lambda _month: year)


def _parse(line: str, year_of: Callable[[int], int]) -> ParsedFragment:
    """Parse one auth-log line; `year_of(month)` dates a classic syslog time."""
    match = _LINE_RE.fullmatch(line)
    if match is None:
        raise MalformedLine("unparseable", "not a syslog line")
    if match["tag"] not in _SSHD_TAGS or match["pid"] is None:
        raise MalformedLine("not-sshd", f"program {match['tag']!r} is not sshd[pid]")
    timestamp_ms = _timestamp(match, year_of)
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


_NEW_YEAR_STEP = 6
"""Months back from one line to the next that start a new year: Dec -> Jan is 11.

A smaller step back (May 1 then Apr 30, lines a sender stamped out of order at a
month's end) stays in the same year.
"""


class SyslogYears:
    """The year of each classic syslog line of one log read in order (`year_of(month)`).

    The first line is in `first`; a step back of more than six months from the
    previous line's month (Dec -> Jan) starts the next year.
    """

    def __init__(self, first: int) -> None:
        self.year = first
        self._month: int | None = None

    def __call__(self, month: int) -> int:
        """The year of a line of `month`, the next line of the log."""
        if self._month is not None and self._month - month > _NEW_YEAR_STEP:
            self.year += 1
        self._month = month
        return self.year


_DATE_RE = re.compile(r"([A-Z][a-z]{2}) {1,2}([0-9]{1,2}) [0-9]{2}:")


def log_year(path: Path) -> int:
    """The year of the first classic syslog line of the log at `path`, from its modification time.

    The last line was written last: it is in the year the file was last modified,
    or the year before if its date comes later in the year than that day (a log of
    March kept until February). Each new year the log crossed (as `SyslogYears`
    counts them) takes one more from the first line's year.
    """
    modified = datetime.fromtimestamp(path.stat().st_mtime, tz=UTC)
    years = SyslogYears(0)
    last = (0, 0)
    with path.open(encoding="utf-8", errors="replace") as lines:
        for line in lines:
            match = _DATE_RE.match(line)
            month = MONTHS.get(match[1]) if match else None
            if match and month is not None:
                years(month)
                last = (month, int(match[2]))
    # A day of slack: syslog writes local time, the modification time is read in UTC.
    later = last > (modified.month, modified.day + 1)
    last_year = modified.year - 1 if later else modified.year
    return last_year - years.year


@dataclass(frozen=True)
class SshdFormat:
    """The built-in `sshd` format: `parse_sshd` in a fixed `year`, as a `router.Format`."""

    year: int = DEFAULT_SYSLOG_YEAR
    name = "sshd"  # not a dataclass field: the same name in every year

    def parse(self, line: str) -> ParsedFragment:
        """Parse one auth-log line; classic syslog times are UTC in `self.year`."""
        return parse_sshd(line, year=self.year)

    def reader(self) -> Callable[[str], ParsedFragment]:
        """A parser for one log's lines in order: from `self.year`, a year more at Dec -> Jan."""
        years = SyslogYears(self.year)
        return lambda line: _parse(line, years)
