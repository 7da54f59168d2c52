"""`ParsedFragment`, the format-independent result of parsing a line, and what formats share.

The shared time helpers (`MONTHS`, `clock_time`, `epoch_ms`), and `StatelessFormat`,
the base of a built-in format that is one parse function.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from types import MappingProxyType
from typing import Any, ClassVar

from framework.kernel.errors import InvalidArgument
from router.errors import MalformedLine

__all__ = ["MONTHS", "ParsedFragment", "StatelessFormat", "clock_time", "epoch_ms"]

# English month abbreviations, as Apache and syslog write them.  A table rather than
# strptime("%b"), which follows the process locale.
MONTHS: Mapping[str, int] = MappingProxyType(
    {
        name: number
        for number, name in enumerate(
            ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"),
            start=1,
        )
    }
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)
# Kafka record timestamps are non-negative int64 milliseconds (-1 means "none").
_MAX_TIMESTAMP_MS = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class ParsedFragment:
    """One fragment: session key, event time (UTC epoch ms) and the format's fields."""

    key: str
    timestamp_ms: int
    fields: dict[str, Any]

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key:
            raise InvalidArgument(f"a fragment key must be a non-empty string, got {self.key!r}")
        if not isinstance(self.timestamp_ms, int) or isinstance(self.timestamp_ms, bool):
            raise InvalidArgument(f"timestamp_ms must be an int, got {self.timestamp_ms!r}")
        if not 0 <= self.timestamp_ms <= _MAX_TIMESTAMP_MS:
            raise InvalidArgument(f"timestamp_ms must be in [0, 2**63), got {self.timestamp_ms}")


class StatelessFormat:
    """A format without settings, which is its parse function: a subclass sets `name` and
    `parse = staticmethod(function)`; it shows as `ClassName()`."""

    name: ClassVar[str]

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def clock_time(match: re.Match[str], year: int, month: int, zone: tzinfo) -> datetime:
    """The time of a log line: `year`, `month`, the `day`, `hour`, `minute` and `second`
    groups of `match`, in `zone`.  `ValueError` for a date that does not exist (Feb 30)."""
    return datetime(
        year,
        month,
        int(match["day"]),
        int(match["hour"]),
        int(match["minute"]),
        int(match["second"]),
        tzinfo=zone,
    )


def epoch_ms(moment: datetime) -> int:
    """Return an aware datetime as UTC epoch ms; MalformedLine("bad-timestamp") before 1970."""
    if moment.tzinfo is None:
        raise InvalidArgument(
            f"epoch_ms() needs an aware datetime, got {moment!r}: give it a time zone "
            "(.replace(tzinfo=UTC) for a UTC time)"
        )
    # Integer arithmetic on timedeltas: no float rounding, sub-millisecond parts are floored.
    millis = (moment - _EPOCH) // _ONE_MS
    if millis < 0:  # datetime stops at year 9999, far below 2**63 ms
        raise MalformedLine("bad-timestamp", f"{moment.isoformat()} is before 1970")
    return millis
