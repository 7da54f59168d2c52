"""The repository's documents as test input: their Python blocks, and the README's processor."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sessionizer.processor import StreamProcessor

__all__ = ["README", "ROOT", "python_blocks", "readme_page_views"]

ROOT = Path(__file__).resolve().parents[2]
"""The repository's root."""
README = ROOT / "README.md"


def python_blocks(document: Path, section: str, *, until: str = "\n## ") -> list[str]:
    """The ```python blocks of `document` from the heading `section` up to `until`, in order."""
    text = document.read_text()
    if section not in text:
        raise AssertionError(f"{document} has no section {section!r}")
    part = text.split(section, 1)[1].split(until, 1)[0]
    return re.findall(r"```python\n(.*?)```", part, flags=re.DOTALL)


def readme_page_views() -> type[StreamProcessor[Any]]:
    """The README's `PageViews`, by running the Python blocks of its processor section."""
    namespace: dict[str, Any] = {}
    for block in python_blocks(README, "## Your own processor"):
        exec(compile(block, str(README), "exec"), namespace)
    page_views: type[StreamProcessor[Any]] = namespace["PageViews"]
    return page_views
