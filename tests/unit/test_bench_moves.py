"""The benchmarks' readings of node logs: moved streams, replays, medians, load imbalance."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from benchmarks.move_events import (
    event_time,
    imbalance,
    mean_loads,
    medians,
    move_figures,
    released_streams,
    replay_of,
    resumed_since,
)

T0 = 1_800_000_000.0


def _event(name: str, at: float, **fields: Any) -> dict[str, Any]:
    stamp = datetime.fromtimestamp(T0 + at, UTC).isoformat()
    return {"event": name, "timestamp": stamp, **fields}


def _resumed(stream: str, at: float, replay: int | None, handover: bool) -> dict[str, Any]:
    fields = {"stream": stream, "offset": 100 - (replay or 0), "committed_offset": 100}
    if replay is not None:
        fields |= {"replay": replay, "handover": handover}
    return _event("stream_resumed", at, **fields)


def test_event_time_reads_the_iso_timestamp() -> None:
    assert event_time(_event("x", 2.5)) == pytest.approx(T0 + 2.5)


def test_replay_prefers_the_logged_field_and_falls_back_to_the_offsets() -> None:
    assert replay_of(_resumed("s", 0, 7, False)) == 7
    old = _resumed("s", 0, None, False)
    old["offset"] = 90
    assert replay_of(old) == 10


def test_resumed_since_keeps_later_events_of_the_wanted_streams() -> None:
    events = [
        _resumed("a", -1, 5, False),  # before the signal: a first start
        _resumed("a", 1, 0, True),
        _resumed("b", 2, 3, False),
        _event("stream_moved", 3, stream="a"),
    ]
    assert [e["stream"] for e in resumed_since(events, T0)] == ["a", "b"]
    assert [e["stream"] for e in resumed_since(events, T0, {"b"})] == ["b"]


def test_move_figures_times_replays_and_handovers() -> None:
    taken = [_resumed("a", 1.0, 0, True), _resumed("b", 3.0, 12, False)]
    figures = move_figures(taken, T0, {"a", "b"})
    assert figures["streams_moved"] == 2
    assert figures["first_resumed_s"] == pytest.approx(1.0)
    assert figures["resumed_s"] == pytest.approx(3.0)
    assert figures["replayed"] == 12 and figures["handovers_used"] == 1


def test_an_incomplete_move_has_no_end_time() -> None:
    figures = move_figures([_resumed("a", 1.0, 0, True)], T0, {"a", "b"})
    assert figures["resumed_s"] is None and figures["first_resumed_s"] == pytest.approx(1.0)
    assert move_figures([], T0, None)["resumed_s"] is None


def test_released_streams_counts_within_the_window() -> None:
    events = [
        _event("streams_released", 0.5, streams=["a", "b"]),
        _event("streams_released", 2.0, streams=["c"]),
        _event("streams_released", 5.0, streams=["d"]),
    ]
    assert released_streams(events, T0 + 0.5, T0 + 5.0) == 3


def test_medians_group_and_judge_exactness_over_every_run() -> None:
    runs = [
        {"mode": "m", "handover": "on", "x": 1.0, "exact": True},
        {"mode": "m", "handover": "on", "x": 3.0, "exact": False},
        {"mode": "m", "handover": "off", "x": None, "exact": True},
    ]
    rows = medians(runs, lambda r: (r["mode"], r["handover"]), ["x"], carry=("mode", "handover"))
    assert rows == [
        {"mode": "m", "handover": "on", "runs": 2, "x": 2.0, "exact": False},
        {"mode": "m", "handover": "off", "runs": 1, "x": None, "exact": True},
    ]


def test_imbalance_is_the_busiest_over_the_mean() -> None:
    assert imbalance({"n1": 300.0, "n2": 100.0}) == pytest.approx(1.5)
    assert imbalance({"n1": 10.0, "n2": 10.0}) == pytest.approx(1.0)
    assert imbalance({}) is None and imbalance({"n1": 0.0}) is None


def test_mean_loads_average_each_member_over_the_readings() -> None:
    readings = [{"n1": 10.0, "n2": 30.0}, {"n1": 20.0, "n2": 10.0}]
    assert mean_loads(readings) == {"n1": 15.0, "n2": 20.0}
    assert mean_loads([]) == {}
