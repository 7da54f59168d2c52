"""`loads_object`: the one total decoder of JSON that comes from outside (znode data).

ZooKeeper data is written by our nodes, but also by older versions, by operators
with zkCli and by anything else with access; a node that reads it must neither
crash nor trust it.  `json.loads` alone is not total: 100,000 nested `[` raise
`RecursionError`, `Infinity` and `1e999` give floats that overflow the first
`int()`, and a 10,000-digit integer costs quadratic time (or raises).  This
decoder returns the JSON object in `data`, or None for anything else, for any
bytes: at most `MAX_JSON_BYTES`, nested at most `MAX_JSON_DEPTH` deep, numbers
finite, integers within a signed 64-bit range, strings encodable as UTF-8.
A leaf module like `framework.kernel.limits`: every package may import it.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Final

from framework.kernel.errors import InvalidArgument

__all__ = ["MAX_JSON_BYTES", "MAX_JSON_DEPTH", "MAX_JSON_INT", "loads_object"]

MAX_JSON_BYTES: Final = 1_048_575
"""The largest JSON text read: ZooKeeper's default `jute.maxbuffer`, the largest znode."""
MAX_JSON_DEPTH: Final = 32
"""The deepest nesting accepted (our znodes nest two levels; a registration three)."""
MAX_JSON_INT: Final = 2**63 - 1
"""Integers must lie in [-2**63, 2**63-1]: offsets, epochs, event times in ms all do."""

_INT_DIGITS: Final = 20  # "-9223372036854775808" has 19 digits and a sign
_STRINGS: Final = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS: Final = re.compile(rb"[\[\]{}]")


class _Refused(InvalidArgument):
    """A number or a constant the decoder does not accept."""


def _int(text: str) -> int:
    if len(text) > _INT_DIGITS:
        raise _Refused(f"integer of {len(text)} characters")
    value = int(text)
    if not -MAX_JSON_INT - 1 <= value <= MAX_JSON_INT:
        raise _Refused("integer outside the signed 64-bit range")
    return value


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Refused(f"number {text[:40]} is not a finite double")
    return value


def _constant(text: str) -> Any:
    raise _Refused(f"{text} is not JSON")


def _depth(data: bytes) -> int:
    """The deepest bracket nesting of `data`, outside strings (a linear scan, no recursion)."""
    depth = deepest = 0
    for bracket in _BRACKETS.findall(_STRINGS.sub(b'""', data)):
        depth += 1 if bracket in b"[{" else -1
        deepest = max(deepest, depth)
    return deepest


def _utf8(value: Any) -> bool:
    """True when every string in `value` (keys too) is encodable (no lone surrogate).

    Recursive, but only over a value `_depth` already bounded."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, dict):
        return all(_utf8(key) and _utf8(item) for key, item in value.items())
    if isinstance(value, list):
        return all(_utf8(item) for item in value)
    return True


def loads_object(data: bytes | bytearray | str | None) -> dict[str, Any] | None:
    """The JSON object in `data`, or None when it is absent, not JSON, not an object or out of
    bounds (size, depth, a non-finite or huge number, a lone surrogate).  Never raises."""
    if data is None:
        return None
    if isinstance(data, str):
        try:
            data = data.encode("utf-8")
        except UnicodeEncodeError:
            return None
    if not isinstance(data, bytes | bytearray) or not data or len(data) > MAX_JSON_BYTES:
        return None
    raw = bytes(data)
    if _depth(raw) > MAX_JSON_DEPTH:
        return None
    try:
        value = json.loads(raw, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except (ValueError, RecursionError, MemoryError):  # UnicodeDecodeError is a ValueError
        return None
    if not isinstance(value, dict) or not _utf8(value):
        return None
    return value
