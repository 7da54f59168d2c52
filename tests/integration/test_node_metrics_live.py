"""Issue 15: a running node's `/metrics` and `/readyz` on real servers.

One `sessionizer node` process with `--metrics-port 0` on its own cluster (one
ZooKeeper, one broker), a slice of the real Apache log over 64 streams.  At the
end of the run the scrape, parsed by `prometheus_client`'s own parser, must
agree with the node's own `node_stats` totals and with what the sessions and
dead-letter topics hold; then ZooKeeper is SIGSTOPped and `/readyz` must answer
503 (while `/healthz` stays 200), and 200 again once it is resumed.

64 streams is where a node once went silent: asking the broker for every
stream's end, one stream at a time behind the fetch's long poll, took 30 s per
metrics publish, so the loop never got back to ZooKeeper's events.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from framework.cluster import LocalCluster
from framework.kernel.config import ConnectionConfig
from framework.provision import provision_streams
from framework.sessions import read_sessions
from framework.testing.cli import DATA
from framework.testing.members import MemberProcess, wait_for
from framework.testing.metrics import http_get, metric_samples
from framework.testing.nodes import NodeGroup, last_words
from framework.testing.traffic import produce
from framework.verify import expected_sessions, verify_sessions
from router.formats import parse_file
from router.fragment import ParsedFragment
from router.naming import deadletter_topic
from router.readback import read_topics
from sessionizer.examples.weblog import WebSessions

pytestmark = pytest.mark.integration
STREAMS = 64
LINES = 1500
WEBLOG = "sessionizer.examples.weblog:WebSessions"
_PAUSE_EVENTS = ("zookeeper_suspended", "zookeeper_resumed", "joined")
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]

# sessionizer_<name>_total sample -> the node_stats field that counts the same thing
COUNTERS = {
    "fragments_consumed": "fragments",
    "sessions_emitted": "sessions",
    "late_fragments": "late",
    "future_records": "future",
    "truncated_sessions": "truncated",
    "skipped_by_ignore_list": "skipped_by_ignore_list",
    "rebalances": "rebalances",
    "sink_send_failures": "sink_failures",
    "rewinds": "rewinds",
    "quarantined_streams": "quarantined",
    "commits": "commits",
}


def _scrape(port: int) -> Samples:
    """Every sample of `/metrics`, parsed by prometheus_client's parser."""
    status, text = http_get(port, "/metrics")
    assert status == 200, f"/metrics answered {status}: {text}"
    return metric_samples(text)


def _total(samples: Samples, name: str) -> float:
    """Sum of a metric's samples over all its labels."""
    return sum(value for (sample, _), value in samples.items() if sample == name)


def _per_stream(samples: Samples, name: str) -> dict[str, float]:
    return {dict(labels)["stream"]: v for (sample, labels), v in samples.items() if sample == name}


def _alive(group: NodeGroup, node: MemberProcess) -> None:
    assert node.process.poll() is None, last_words(group, node.node)


def _fragments() -> list[ParsedFragment]:
    path = DATA / "apache_logs"
    return parse_file(path, "apache")[:LINES]


def test_metrics_agree_with_the_node_and_readyz_follows_a_zookeeper_outage(
    local_cluster: Callable[..., LocalCluster], app: str, tmp_path: Path
) -> None:
    cluster = local_cluster(zookeepers=1, brokers=1)
    connection = ConnectionConfig(cluster.zk_connect, cluster.bootstrap, app)
    provision_streams(connection, STREAMS)
    fragments = _fragments()
    expected = expected_sessions(fragments, WebSessions())
    with NodeGroup(connection, tmp_path, WEBLOG) as group:
        node = group.start("n1", "--metrics-port", "0")
        serving = wait_for(lambda: node.events("metrics_serving"), 60, "n1 to serve metrics")
        port = int(serving[0]["port"])
        produce(connection, STREAMS, fragments, end=True)

        def all_out() -> Samples | None:
            _alive(group, node)
            samples = _scrape(port)
            done = (
                _total(samples, "sessionizer_fragments_consumed_total") == len(fragments)
                and _total(samples, "sessionizer_sessions_emitted_total") == expected.total()
                and _total(samples, "sessionizer_streams_owned") == STREAMS
                and _total(samples, "sessionizer_open_sessions") == 0
            )
            return samples if done else None

        wait_for(all_out, 90, "a scrape with every fragment in and every session out", 0.5)
        scraped = _agreeing_with_node_stats(group, node, port, len(fragments), expected.total())
        _check_against_topics(scraped, connection, fragments, expected)
        _readyz_through_an_outage(cluster, group, node, port)


def _agreeing_with_node_stats(
    group: NodeGroup, node: MemberProcess, port: int, fragments: int, sessions: int
) -> Samples:
    """A scrape that agrees with the node's own totals: its last `node_stats` (every 10 s).

    Both are waited for once the run is over, so nothing moves between them.
    """
    differences: list[str] = ["no node_stats with every fragment and session yet"]

    def agree() -> Samples | None:
        _alive(group, node)
        done = [
            e
            for e in node.events("node_stats")
            if e["fragments"] == fragments and e["sessions"] == sessions
        ]
        if not done:
            return None
        samples = _scrape(port)
        differences[:] = _differences(samples, done[-1])
        return None if differences else samples

    try:
        return wait_for(agree, 40, "a node_stats event the scrape agrees with", 0.5)
    except TimeoutError:
        raise AssertionError(f"/metrics disagrees with node_stats: {differences}") from None


def _differences(samples: Samples, stats: dict[str, Any]) -> list[str]:
    """Where the scrape and the node's own totals differ ([] when they agree)."""
    label = (("node", "n1"),)
    pairs = {
        f"sessionizer_{name}_total": (samples[(f"sessionizer_{name}_total", label)], stats[field])
        for name, field in COUNTERS.items()
    }
    pairs["sessionizer_dead_letters_total"] = (
        _total(samples, "sessionizer_dead_letters_total"),
        stats["dead_letters"],
    )
    pairs["sessionizer_open_sessions"] = (
        _total(samples, "sessionizer_open_sessions"),
        stats["open_sessions"],
    )
    pairs["sessionizer_streams_owned"] = (samples[("sessionizer_streams_owned", label)], STREAMS)
    lag = _per_stream(samples, "sessionizer_stream_lag")
    pairs["sessionizer_stream_lag"] = (lag, {s: float(v) for s, v in stats["lag"].items()})
    pairs["every stream caught up"] = (lag, dict.fromkeys(lag, 0.0))
    found = [f"{name}: scraped {a}, node {b}" for name, (a, b) in pairs.items() if a != b]
    if len(lag) != STREAMS:
        found.append(f"sessionizer_stream_lag for {len(lag)} streams, {STREAMS} owned")
    if not samples[("sessionizer_commit_latency_seconds_count", label)] > 0:
        found.append("no commit latency observed")
    return found


def _check_against_topics(
    samples: Samples,
    connection: ConnectionConfig,
    fragments: list[ParsedFragment],
    expected: Any,
) -> None:
    written = read_sessions(connection.bootstrap, connection.app, deduplicate=False)
    result = verify_sessions(written, expected, len(fragments))
    print(f"\n{result.line()}")
    assert result.exact, result
    assert _total(samples, "sessionizer_sessions_emitted_total") == len(written)
    letters = deadletter_topic(connection.app)
    dead = len(read_topics(connection.bootstrap, [letters])[letters])
    assert _total(samples, "sessionizer_dead_letters_total") == dead


def _readyz_through_an_outage(
    cluster: LocalCluster, group: NodeGroup, node: MemberProcess, port: int
) -> None:
    assert http_get(port, "/readyz")[0] == 200
    cluster.pause("zk1")
    try:
        wait_for(lambda: http_get(port, "/readyz")[0] == 503, 30, "/readyz 503 in the outage", 0.2)
        assert http_get(port, "/healthz")[0] == 200, "an outage must not fail the liveness probe"
        _alive(group, node)
    finally:
        cluster.resume("zk1")
    wait_for(lambda: _back(port, node), 60, "/readyz 200 with the node back from its pause", 0.2)
    _alive(group, node)


def _back(port: int, node: MemberProcess) -> bool:
    """Ready, and the node has logged its pause and then its resumption (or a new join).

    Right after the reconnect kazoo is connected before the loop applies the pause,
    so a 200 alone could come before the node paused at all.
    """
    told = [e["event"] for e in node.events() if e.get("event") in _PAUSE_EVENTS]
    resumed = "zookeeper_suspended" in told and told[-1] != "zookeeper_suspended"
    return resumed and http_get(port, "/readyz")[0] == 200
