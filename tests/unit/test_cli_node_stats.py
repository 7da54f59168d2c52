"""`node_stats` / `node_stopped`: the commit latency is averaged over timed rounds."""

from __future__ import annotations

from framework.node.stats import NodeStats


def test_mean_commit_latency_is_over_rounds_and_never_above_the_max() -> None:
    stats = NodeStats()
    totals = stats.totals([])
    assert (totals["commit_ms_mean"], totals["commit_ms_max"], totals["commit_rounds"]) == (0, 0, 0)
    # Rounds that wrote no state (every stream unchanged): timed, but no commits.
    for seconds in (0.0002, 0.0002, 0.0002, 0.0002, 0.0002):
        stats.commit_latency(seconds, streams=3)
    stats.commit_latency(5.0, streams=0)  # nothing to commit: not a round
    totals = stats.totals([])
    assert totals["commits"] == 0
    assert totals["commit_rounds"] == 5
    assert totals["commit_ms_mean"] == 0.2
    assert totals["commit_ms_max"] == 0.2
    stats.commits += 12  # one round wrote 12 stream states
    stats.commit_latency(0.0008, streams=12)
    totals = stats.totals([])
    assert totals["commit_ms_mean"] == 0.3  # (5 * 0.2 + 0.8) / 6 rounds
    assert totals["commit_ms_mean"] <= totals["commit_ms_max"] == 0.8
