"""An open `WebSessions` session costs at most 800 bytes of Python heap (issue 24, grace 0).

A size, not a speed: `benchmarks.session_memory` feeds 20,000 visitors (three
requests each, fields of tests/data/apache_logs, distinct "ip|agent" keys) into an
engine with `grace = 0`, so that every fragment is folded and no session ends, and
divides the heap `tracemalloc` sees kept alive by the open sessions: the key, the
engine's and the tracker's bookkeeping and the `Visit` state included.
"""

from __future__ import annotations

from benchmarks.session_memory import TARGET_BYTES, measure, workload


def test_an_open_web_session_without_raw_fragments_takes_at_most_800_bytes() -> None:
    result = measure(workload(20_000, 3), "heap")
    assert result["open_sessions"] == 20_000
    assert result["bytes_per_session"] <= TARGET_BYTES == 800, result
