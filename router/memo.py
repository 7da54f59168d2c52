"""Bounded memos of the line parsers: a log names the same few hundred values again and again."""

from __future__ import annotations

from typing import TypeVar

__all__ = ["MEMO_SIZE", "remember"]

V = TypeVar("V")

MEMO_SIZE = 4096
"""Entries each parser's memo keeps (it is cleared when full)."""


def remember(memo: dict[str, V], key: str, value: V) -> V:
    """Keep `value` under `key` in `memo` (cleared first when it holds `MEMO_SIZE`); return it."""
    if len(memo) >= MEMO_SIZE:
        memo.clear()
    memo[key] = value
    return value
