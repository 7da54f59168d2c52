"""The delivery-modes benchmark's arithmetic: ratios, state bytes, the target, latencies."""

from __future__ import annotations

import json
from typing import Any

import pytest

from benchmarks.delivery_latency import (
    Arrival,
    PacedSend,
    closed_by_traffic,
    per_million,
    session_latencies,
    summary,
)
from benchmarks.delivery_modes import COLUMNS, compare, median_run, section, target
from router.fragment import ParsedFragment
from sessionizer.processor import Timing


def _row(
    client: str, interval: float, delivery: str, rate: float, zk: float, topic: float
) -> dict[str, Any]:
    return {
        "client": client,
        "interval_s": interval,
        "delivery": delivery,
        "fragments_per_s": rate,
        "zk_bytes_per_M": zk,
        "topic_bytes_per_M": topic,
    }


def test_exactly_once_is_compared_with_at_least_once_of_the_same_client_and_interval() -> None:
    rows = compare(
        [
            _row("confluent", 1.0, "at-least-once", 50_000.0, 4_000.0, 0.0),
            _row("confluent", 1.0, "exactly-once", 45_000.0, 4_000.0, 6_000.0),
            _row("confluent", 5.0, "at-least-once", 40_000.0, 1_000.0, 0.0),
            _row("confluent", 5.0, "exactly-once", 20_000.0, 1_000.0, 1_500.0),
            _row("kafka-python", 1.0, "exactly-once", 30_000.0, 4_000.0, 6_000.0),
        ]
    )
    assert [r["vs_at_least_once"] for r in rows] == [None, 0.9, None, 0.5, None]
    assert [r["state_bytes_per_M"] for r in rows] == [4_000.0, 10_000.0, 1_000.0, 2_500.0, 10_000.0]
    measured_later = {"p50_s", "p95_s", "max_s", "exact", "duplicates", "error"}
    assert set(COLUMNS) <= set(rows[1]) | measured_later
    # 0.9 >= 0.85 at 1 s; kafka-python's exactly-once had no at-least-once run beside it.
    assert target(rows) == {"confluent": True, "kafka-python": None}
    assert target(rows, interval=5.0) == {"confluent": False}


def test_a_failed_run_has_no_figures_and_its_error_is_reported() -> None:
    failed = {"client": "confluent", "interval_s": 1.0, "delivery": "at-least-once"}
    rows = compare([{**failed, "error": "RuntimeError: boom"}, _row("confluent", 1.0,
                   "exactly-once", 10.0, 1.0, 1.0)])  # fmt: skip
    assert rows[1]["vs_at_least_once"] is None and target(rows) == {"confluent": None}
    text, plots = section({"results": rows}, 2)
    assert "RuntimeError: boom" in text and "not measured" in text and plots == []


def test_missing_state_bytes_stay_missing() -> None:
    row = {**_row("c", 1.0, "at-least-once", 1.0, 0.0, 0.0), "zk_bytes_per_M": None}
    row["topic_bytes_per_M"] = None
    assert compare([row])[0]["state_bytes_per_M"] is None
    assert per_million(None, 10) is None and per_million(5, 0) is None
    assert per_million(250, 500_000) == 500.0


def _session(key: str, last_ts: int) -> bytes:
    return json.dumps({"session_id": f"{key}-{last_ts}", "key": key, "last_ts": last_ts}).encode()


def test_latency_runs_from_the_last_fragments_acknowledgement_to_the_sessions_arrival() -> None:
    fragments = [
        ParsedFragment("a", 1_000, {}),
        ParsedFragment("b", 2_000, {}),
        ParsedFragment("a", 3_000, {}),
        ParsedFragment("c", 4_000, {}),
    ]
    sent = PacedSend(sent_at=[10.0, 10.0, 11.0, 12.0], ended_at=13.0)
    arrivals = [
        Arrival(11.5, b"a", _session("a", 3_000)),  # its last fragment acknowledged at 11.0
        Arrival(14.0, b"b", _session("b", 2_000)),  # read after the end was sent: still counted
        Arrival(13.5, b"c", _session("c", 4_000)),  # only the end of input closes it: left out
        Arrival(12.5, b"x", None),  # not a session
    ]
    assert session_latencies(arrivals, fragments, sent, cutoff_ms=3_000) == [0.5, 4.0]
    assert Arrival(0.0, b"ab", b"cde").size == 5 and Arrival(0.0, None, None).size == 0


def test_a_session_is_closed_by_traffic_once_stream_time_passes_its_timeout_and_grace() -> None:
    fragments = [ParsedFragment("a", 1_000_000, {}), ParsedFragment("b", 9_000_000, {})]
    timing = Timing(timeout_ms=1_800_000, grace_ms=120_000, max_duration_ms=None)
    assert closed_by_traffic(fragments, timing, margin_ms=300_000) == 6_780_000


def test_latency_summary() -> None:
    assert summary([]) == {"p50_s": None, "p95_s": None, "max_s": None}
    figures = summary([float(n) for n in range(1, 101)])
    assert figures["p50_s"] == 50.5 and figures["p95_s"] == 95.0 and figures["max_s"] == 100.0
    assert summary([2.0, 1.0]) == pytest.approx({"p50_s": 1.5, "p95_s": 2.0, "max_s": 2.0})


def test_run_all_runs_it_quick_on_one_client_and_full_on_both() -> None:
    import argparse

    from benchmarks.run_all import _plan

    def planned(quick: bool) -> list[str]:
        args = argparse.Namespace(
            quick=quick, fragments=30_000, failover_fragments=40_000, peer_timeout=1.0
        )
        return _plan(args)["delivery_modes"][1]

    assert planned(True)[planned(True).index("--clients") + 1] == "confluent"
    assert "--clients" not in planned(False)  # both clients, the default


def test_repeated_runs_report_the_median_run_and_are_exact_only_if_every_run_was() -> None:
    runs = [
        {"fragments_per_s": rate, "exact": exact, "duplicates": dups, "lost": 0, "seconds": rate}
        for rate, exact, dups in ((9_000.0, True, 0), (15_000.0, False, 2), (10_000.0, True, 0))
    ]
    row = median_run(runs)
    assert row["fragments_per_s"] == 10_000.0 and row["seconds"] == 10_000.0  # that run's own
    assert row["fragments_per_s_runs"] == [9_000.0, 15_000.0, 10_000.0]
    assert row["exact"] is False and row["duplicates"] == 2
    assert median_run(runs[:1])["exact"] is True
