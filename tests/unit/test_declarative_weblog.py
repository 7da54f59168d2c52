"""`DeclarativeWebSessions` writes the sessions `WebSessions` writes, byte for byte.

Over the real Apache log in tests/data (read in place, 10,000 requests), both
processors run in a `SessionEngine` each, as a node runs them, with a watermark every
500 fragments as producers write them; every output (sessions as the sink encodes
them) must be the same bytes, in the same order.  This module also runs on the
compiled path (tests/unit/test_hot_path_compiled.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from framework import StreamProcessor
from framework.kernel.watermark import Watermark
from router.formats import parse_file
from sessionizer import FinishedSession, Fragment, SessionEngine
from sessionizer.examples import WebSessions
from sessionizer.examples.weblog import is_page
from sessionizer.examples.weblog_declarative import PAGE, DeclarativeWebSessions
from sessionizer.sinks import encode_session

APACHE_LOG = Path(__file__).resolve().parents[1] / "data" / "apache_logs"


def _outputs(processor: StreamProcessor[Any]) -> list[bytes | str]:
    engine = SessionEngine("sessionizer.stream.0000", processor)
    outputs: list[Any] = []
    high = offset = 0
    for fragment in parse_file(APACHE_LOG, "apache"):
        high = max(high, fragment.timestamp_ms)
        record = Fragment(offset, fragment.key, fragment.timestamp_ms, fragment.fields)
        outputs += engine.process(record)
        offset += 1
        if offset % 500 == 0:  # a watermark record every 500, as the producer writes them
            outputs += engine.process(Watermark(high, offset=offset))
            offset += 1
    outputs += engine.process(Watermark(high, end=True, offset=offset))
    return [
        encode_session(out) if isinstance(out, FinishedSession) else repr(out) for out in outputs
    ]


def test_the_declared_visits_are_the_hand_written_ones_byte_for_byte() -> None:
    declared = _outputs(DeclarativeWebSessions())
    written = _outputs(WebSessions())
    assert sum(isinstance(out, bytes) for out in written) > 3_000  # the log's 3,223 visits
    assert declared == written


def test_the_declared_page_is_is_page_on_every_path_of_the_log_and_the_odd_ones() -> None:
    paths = {fragment.fields["path"] for fragment in parse_file(APACHE_LOG, "apache")}
    # What the log lacks: cases, queries, a suffix only in the query, no path at all.
    paths |= {"/A.CSS", "/x.Js?v=1", "/p.html?f=a.css", "/", "", "?", "/q?", "/font.woff2"}
    for path in paths:
        assert PAGE.holds({"status": 200, "path": path}) == is_page(path), path
        assert not PAGE.holds({"status": 404, "path": path}), path
