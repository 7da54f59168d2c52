"""Parser for JSON Lines input: one object with "key", "ts" and any other fields.

A numeric "ts" is epoch milliseconds, or epoch seconds with `time_unit="s"`
(`sessionizer produce --time-unit s`); an ISO-8601 string is read as it says.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

from router.errors import MalformedLine
from router.fragment import ParsedFragment, epoch_ms

__all__ = ["TIME_UNITS", "JsonlFormat", "TimeUnit", "parse_jsonl"]

TimeUnit = Literal["ms", "s"]
TIME_UNITS: Final[tuple[TimeUnit, ...]] = ("ms", "s")
"""The units a numeric "ts" may be given in: epoch milliseconds (the default) or seconds."""


def _timestamp(ts: Any, unit: TimeUnit) -> int:
    # bool is an int subclass; `true` is not a time.
    if isinstance(ts, bool):
        raise MalformedLine("bad-timestamp", f'"ts" must be a number or an ISO-8601 string: {ts}')
    if unit == "s" and isinstance(ts, int | float):
        return _in_range(ts, _seconds_to_ms(ts))
    if isinstance(ts, int):
        return _in_range(ts, ts)
    if isinstance(ts, str):
        try:
            moment = datetime.fromisoformat(ts)
        except ValueError as exc:
            raise MalformedLine("bad-timestamp", f'"ts" {ts!r} is not ISO-8601') from exc
        # A time without a zone is taken as UTC, like the other formats.
        return epoch_ms(moment if moment.tzinfo else moment.replace(tzinfo=UTC))
    # Floats of milliseconds are refused rather than rounded, so that every producer
    # agrees on the millisecond.
    raise MalformedLine(
        "bad-timestamp",
        f'"ts" must be integer epoch ms or an ISO-8601 string (epoch seconds, fractions '
        f"included: --time-unit s): {ts!r}",
    )


def _seconds_to_ms(ts: int | float) -> int:
    if isinstance(ts, int):
        return ts * 1000
    millis = ts * 1000
    if not math.isfinite(millis):  # inf, nan, or seconds past what a double holds as ms
        raise MalformedLine("bad-timestamp", f'"ts" {ts} is not a finite number of ms')
    # Every producer rounds the same IEEE double the same way: one millisecond for all.
    return round(millis)


def _in_range(ts: int | float, millis: int) -> int:
    if millis < 0:
        raise MalformedLine("bad-timestamp", f'"ts" {ts} is negative')
    if millis >= 1 << 63:
        raise MalformedLine("bad-timestamp", f'"ts" {ts} does not fit in 64 bits as ms')
    return millis


def parse_jsonl(line: str, time_unit: TimeUnit = "ms") -> ParsedFragment:
    """Parse one JSON object; "key" and "ts" (a number in `time_unit`, or ISO-8601) become
    the fragment's key and time."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError) as exc:  # RecursionError: absurdly deep nesting
        raise MalformedLine("bad-json", str(exc)) from exc
    if not isinstance(obj, dict):
        raise MalformedLine("bad-json", f"expected an object, got {type(obj).__name__}")
    key = obj.get("key")
    if not isinstance(key, str) or not key:
        raise MalformedLine("missing-key", '"key" must be a non-empty string')
    if "ts" not in obj:
        raise MalformedLine("bad-timestamp", 'no "ts" member')
    timestamp_ms = _timestamp(obj["ts"], time_unit)
    fields = {name: value for name, value in obj.items() if name not in ("key", "ts")}
    return ParsedFragment(key, timestamp_ms, fields)


@dataclass(frozen=True)
class JsonlFormat:
    """The built-in `jsonl` format: `parse_jsonl` with numeric times in `time_unit`, as a
    `router.Format`."""

    time_unit: TimeUnit = "ms"
    name = "jsonl"  # not a dataclass field: the same name in every unit

    def parse(self, line: str) -> ParsedFragment:
        """Parse one JSON object (`parse_jsonl`)."""
        return parse_jsonl(line, self.time_unit)
