"""Tables of the scenario benchmarks: on the terminal (`show`) and in RESULTS.md (`markdown`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from benchmarks.common import print_table

__all__ = ["cell", "markdown", "show"]


def cell(value: Any) -> str:
    """One value as the tables print it: booleans as yes/no, big numbers grouped."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if abs(value) >= 100:
            return f"{value:,.0f}"
        return f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    if value is None:
        return "-"
    return str(value)


def show(title: str, rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
    """Print a titled table on stdout."""
    print(f"\n{title}")
    print_table([{c: cell(r.get(c)) for c in columns} for r in rows], columns)
    # Flushed now: a child process forked later must not inherit (and print again) the buffer.
    sys.stdout.flush()


def markdown(rows: Sequence[dict[str, Any]], columns: Sequence[str | tuple[str, str]]) -> str:
    """A GitHub markdown table; a column is a key or (key, header)."""
    keys = [c if isinstance(c, str) else c[0] for c in columns]
    heads = [c if isinstance(c, str) else c[1] for c in columns]
    lines = ["| " + " | ".join(heads) + " |", "|" + "|".join("---:" for _ in heads) + "|"]
    lines += ["| " + " | ".join(cell(r.get(k)) for k in keys) + " |" for r in rows]
    return "\n".join(lines)
