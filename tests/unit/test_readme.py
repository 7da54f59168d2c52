"""The README's processor example and its test run as written, and sessionize as it says."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from framework.testkit import assert_batch, assert_exact, frag
from sessionizer.processor import StreamProcessor

README = Path(__file__).resolve().parents[2] / "README.md"
MINUTE = 60_000


def _processor_blocks() -> list[str]:
    """The Python blocks of the README's "Your own processor" section, in order."""
    text = README.read_text()
    section = text.split("## Your own processor", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)


def readme_page_views() -> type[StreamProcessor]:
    namespace: dict[str, Any] = {}
    for block in _processor_blocks():
        exec(compile(block, str(README), "exec"), namespace)
    page_views: type[StreamProcessor] = namespace["PageViews"]
    return page_views


def test_the_readme_processor_comes_with_a_test_that_passes() -> None:
    example, test = _processor_blocks()[:2]  # then the key example, byip.py
    assert "class PageViews(StreamProcessor)" in example
    assert "from framework.testkit import" in test and "assert_exact(PageViews()" in test
    assert len(test.strip().splitlines()) <= 4  # the import, a blank line, the input, the assert
    assert issubclass(readme_page_views(), StreamProcessor)  # runs both blocks: the test passes


def test_the_readme_processor_counts_pages_and_ends_on_unload() -> None:
    page_views = readme_page_views()
    visit = [
        frag("v", 0, event="view"),
        frag("v", 1 * MINUTE, event="view"),
        frag("v", 2 * MINUTE, event="unload"),
        frag("v", 3 * MINUTE, event="view"),
    ]
    result = assert_exact(page_views(), visit)
    assert [(s.fragments, s.result["pages"]) for s in result.sessions] == [(3, 3), (1, 1)]
    assert_batch(page_views(), visit)
