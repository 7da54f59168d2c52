"""`/metrics`, `/healthz` and `/readyz` of a node, over the in-process fakes of its parts."""

from __future__ import annotations

import urllib.error
import urllib.request

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from framework.node.node import Node
from router.generator import generate_fragments
from sessionizer.examples.weblog import WebSessions
from state.store import VersionedMemory
from tests.unit.node_fakes import FakeCoordinator, FakeLog, FlakySink, node_config, parts
from tests.unit.node_fakes import traffic_log as log_of

FRAGMENTS = list(generate_fragments(80, seed=3))


def get(port: int, path: str) -> tuple[int, str]:
    """GET a path of the node's HTTP endpoint; (status, body)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, parsed by prometheus_client's own parser."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_probes_follow_the_loop_and_the_counters_match_the_node_totals() -> None:
    log = FakeLog(log_of(FRAGMENTS, 3), per_poll=2)
    probes: dict[str, tuple[int, str]] = {}

    def probe(coordinator: FakeCoordinator) -> None:
        port = node.metrics_port
        if coordinator.polls == 20:
            probes["ready"] = get(port, "/readyz")
            probes["alive"] = get(port, "/healthz")
            coordinator.paused = True
            probes["paused"] = get(port, "/readyz")
            coordinator.paused = False
            probes["metrics"] = get(port, "/metrics")

    sink = FlakySink(fail_flushes={2})  # a sink failure shows in the counters too
    node = Node(
        node_config(metrics_port=0, metrics_host="127.0.0.1"),
        processor=WebSessions(),
        parts=parts(log, sink, VersionedMemory(), log.caught_up, on_poll=probe),
    )
    node.run()
    assert probes["ready"][0] == 200 and probes["alive"][0] == 200
    assert probes["paused"] == (503, "not ok: paused: ZooKeeper is unreachable\n")
    assert "sessionizer_fragments_consumed_total" in probes["metrics"][1]

    assert node.metrics is not None
    final = samples(generate_latest(node.metrics.registry).decode())
    totals = node.stats.totals([])
    label = (("node", "n1"),)
    for metric, key in [
        ("sessionizer_fragments_consumed_total", "fragments"),
        ("sessionizer_sessions_emitted_total", "sessions"),
        ("sessionizer_sink_send_failures_total", "sink_failures"),
        ("sessionizer_rewinds_total", "rewinds"),
        ("sessionizer_commits_total", "commits"),
    ]:
        assert final[(metric, label)] == totals[key], metric
    assert totals["sessions"] > 0 and totals["sink_failures"] == 1
    assert final[("sessionizer_commit_latency_seconds_count", label)] > 0
