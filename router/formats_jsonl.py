"""Parser for JSON Lines input: one object with "key", "ts" and any other fields."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from router.errors import MalformedLine
from router.fragment import ParsedFragment, StatelessFormat, epoch_ms

__all__ = ["JsonlFormat", "parse_jsonl"]


def _timestamp(ts: Any) -> int:
    # bool is an int subclass; `true` is not a time.  Floats are refused rather than
    # rounded so that every producer agrees on the millisecond.
    if isinstance(ts, int) and not isinstance(ts, bool):
        if ts < 0:
            raise MalformedLine("bad-timestamp", f'"ts" {ts} is negative')
        if ts >= 1 << 63:
            raise MalformedLine("bad-timestamp", f'"ts" {ts} does not fit in 64 bits')
        return ts
    if isinstance(ts, str):
        try:
            moment = datetime.fromisoformat(ts)
        except ValueError as exc:
            raise MalformedLine("bad-timestamp", f'"ts" {ts!r} is not ISO-8601') from exc
        # A time without a zone is taken as UTC, like the other formats.
        return epoch_ms(moment if moment.tzinfo else moment.replace(tzinfo=UTC))
    raise MalformedLine("bad-timestamp", f'"ts" must be epoch ms or an ISO-8601 string: {ts!r}')


def parse_jsonl(line: str) -> ParsedFragment:
    """Parse one JSON object; "key" and "ts" become the fragment's key and time."""
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
    timestamp_ms = _timestamp(obj["ts"])
    fields = {name: value for name, value in obj.items() if name not in ("key", "ts")}
    return ParsedFragment(key, timestamp_ms, fields)


class JsonlFormat(StatelessFormat):
    """The built-in `jsonl` format: `parse_jsonl` as a `router.Format`."""

    name = "jsonl"
    parse = staticmethod(parse_jsonl)
