"""`benchmarks.resume_time` reads a node's own log: from taking its streams to the last resumed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.resume_time import _resume_seconds
from framework.processes import MemberProcess


def _node(tmp_path: Path, events: list[dict[str, Any]]) -> MemberProcess:
    log = tmp_path / "a.jsonl"
    log.write_text("".join(json.dumps(event) + "\n" for event in events))
    return MemberProcess("a", None, log)  # type: ignore[arg-type]  # only its log is read


def test_it_measures_from_the_first_take_to_the_last_stream_resumed(tmp_path: Path) -> None:
    events = [
        {"event": "streams_taken", "timestamp": "2026-11-29T09:00:00.000000Z"},
        {"event": "stream_resumed", "timestamp": "2026-11-29T09:00:00.010000Z"},
        {"event": "streams_taken", "timestamp": "2026-11-29T09:00:00.020000Z"},
        {"event": "stream_resumed", "timestamp": "2026-11-29T09:00:00.250000Z"},
        {"event": "stream_resumed", "timestamp": "2026-11-29T09:00:09.000000Z"},  # a later move
    ]
    assert abs(_resume_seconds(_node(tmp_path, events), 2) - 0.25) < 1e-6
