"""The README's processor example and its test run as written, and sessionize as it says."""

from __future__ import annotations

from framework.testing.docs import README, python_blocks, readme_page_views
from framework.testkit import assert_batch, assert_exact, frag
from sessionizer.processor import StreamProcessor

MINUTE = 60_000


def _processor_blocks() -> list[str]:
    """The Python blocks of the README's "Your own processor" section, in order."""
    return python_blocks(README, "## Your own processor")


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
