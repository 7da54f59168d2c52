"""The README's processor example runs as written and sessionizes as it says."""

from __future__ import annotations

import re
from pathlib import Path

from sessionizer.engine import SessionEngine
from sessionizer.processor import StreamProcessor
from sessionizer.records import FinishedSession, Fragment, Watermark

README = Path(__file__).resolve().parents[2] / "README.md"


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


def test_the_readme_processor_counts_pages_and_ends_on_unload() -> None:
    namespace: dict = {}
    for block in _python_blocks(README.read_text()):
        exec(compile(block, str(README), "exec"), namespace)
    page_views = namespace["PageViews"]
    assert issubclass(page_views, StreamProcessor)

    engine = SessionEngine("s.stream.0000", page_views())
    minute = 60_000
    records = [
        Fragment(0, "v", 0, {"event": "view"}),
        Fragment(1, "v", 1 * minute, {"event": "view"}),
        Fragment(2, "v", 2 * minute, {"event": "unload"}),
        Fragment(3, "v", 3 * minute, {"event": "view"}),
        Watermark(4, 24 * 60 * minute, end_of_input=True),
    ]
    out = [o for r in records for o in engine.process(r)]
    sessions = [o for o in out if isinstance(o, FinishedSession)]
    assert [(s.fragments, s.result["pages"]) for s in sessions] == [(3, 3), (1, 1)]
