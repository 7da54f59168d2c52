"""A real network partition: one node cut from ZooKeeper, from Kafka, or from both, then healed.

The servers run in the server namespace of a `NetworkLab` (ZooKeeper on
10.213.0.1, Kafka on 10.213.0.2), each node in a namespace of its own, joined
by veth pairs to a bridge.  The test itself acts from the server namespace
(its thread is moved there), so its producer, its ZooKeeper client and the
state observer are never cut.  Expected (DESIGN.md section 4):

- cut from ZooKeeper (or from both): after its session timeout the others take
  the node's streams; the node is fenced off (it drops them) and rejoins after
  healing;
- cut from Kafka only: the node keeps its claims, its streams pause, and they
  resume after healing.

Always: no stored offset ever moves backwards (no stream processed by two
nodes past the zombie window), and the output is exact at the end.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from framework.cluster import LocalCluster
from framework.cluster.netns import CutTarget, NetworkLab, unavailable
from framework.kernel.config import ConnectionConfig
from framework.kernel.zookeeper import zookeeper_client
from framework.progress import end_offsets, read_states
from framework.provision import provision_streams
from framework.sessions import read_sessions
from framework.testing.members import claims_by_owner, wait_for
from framework.testing.nodes import (
    NodeGroup,
    StateObserver,
    answering,
    node_story,
    settled,
    streams_of,
)
from framework.testing.traffic import produce
from framework.verify import expected_sessions, verify_sessions
from router.generator import generate_fragments
from sessionizer.examples.weblog import WebSessions

pytestmark = pytest.mark.integration

WEBLOG = "sessionizer.examples.weblog:WebSessions"
NODES = ("n1", "n2", "n3")
VICTIM = "n2"
STREAMS = 9
SESSION_TIMEOUT = 4.0
# What a node logs when it sees its ZooKeeper connection or its streams go.
NOTICED = ("zookeeper_suspended", "streams_lost", "stream_fenced")


@pytest.fixture
def lab() -> Iterator[NetworkLab]:
    """A server namespace and one namespace per node; skipped where `ip netns` is refused."""
    reason = unavailable()
    if reason is not None:
        pytest.skip(reason)
    with NetworkLab(NODES) as network:
        yield network


@pytest.fixture
def cluster(lab: NetworkLab, tmp_path: Path) -> Iterator[LocalCluster]:
    """1 ZooKeeper and 1 Kafka JVM inside the lab's server namespace (stopped before the lab)."""
    with LocalCluster(
        tmp_path / "cluster",
        host=lab.zk_address,
        kafka_host=lab.kafka_address,
        netns=lab.server,
    ) as servers:
        yield servers


@pytest.mark.parametrize("cut", ["zk", "kafka", "both"])
def test_a_partitioned_node_moves_or_pauses_its_streams_and_output_stays_exact(
    lab: NetworkLab, cluster: LocalCluster, app: str, tmp_path: Path, cut: CutTarget
) -> None:
    connection = ConnectionConfig(cluster.zk_connect, cluster.bootstrap, app)
    streams = streams_of(app, STREAMS)
    others = [n for n in NODES if n != VICTIM]
    fragments = list(generate_fragments(900, seed=12))
    third = len(fragments) // 3
    started = time.monotonic()
    # The test acts from the servers' own namespace: the only place that is never cut.
    with lab.inside(lab.server):
        provision_streams(connection, STREAMS)
        with (
            NodeGroup(connection, tmp_path, WEBLOG, session_timeout=SESSION_TIMEOUT) as group,
            zookeeper_client(connection.zk) as zk,
            StateObserver(connection, streams) as observer,
        ):
            try:
                for node in NODES:
                    group.start(node, netns=lab.namespace(node))
                produce(connection, STREAMS, fragments[:third], end=False)
                wait_for(
                    answering(group, lambda: settled(zk, connection, NODES, streams)),
                    120,
                    "catch-up",
                )
                held = claims_by_owner(zk, connection.paths).get(VICTIM, set())
                assert held, f"{VICTIM} holds no stream before the cut"

                lab.cut(VICTIM, cut)
                cut_at = time.monotonic()
                # Traffic flows meanwhile.
                produce(connection, STREAMS, fragments[third : 2 * third], end=False)
                if cut == "kafka":
                    _assert_streams_pause(group, zk, connection, held, cut_at)
                else:
                    # Past the victim's session timeout the others own every stream,
                    # and they catch up on its streams too.
                    wait_for(
                        answering(group, lambda: settled(zk, connection, others, streams)),
                        120,
                        "takeover",
                    )
                    victim = group.nodes[VICTIM]
                    wait_for(
                        lambda: [e for e in victim.events() if e.get("event") in NOTICED],
                        60,
                        f"{VICTIM} to notice it lost ZooKeeper",
                    )
                lab.heal(VICTIM)
                produce(connection, STREAMS, fragments[2 * third :], end=True)
                wait_for(
                    answering(group, lambda: settled(zk, connection, NODES, streams)),
                    180,
                    "heal and rejoin",
                )
                assert group.running() == list(NODES), "a node died"
            except BaseException:
                print(f"\nnode events (cut {cut}):\n{node_story(group)}")
                raise
            victim = group.nodes[VICTIM]
            fenced = victim.events("streams_lost") + victim.events("stream_fenced")
            print(f"\nnode events (cut {cut}):\n{node_story(group)}")
        written = read_sessions(connection.bootstrap, connection.app, deduplicate=False)
    if cut == "kafka":
        assert not fenced, f"{VICTIM} gave up streams although ZooKeeper stayed reachable"
    else:
        assert fenced, f"{VICTIM} never dropped the streams it lost during the partition"
    assert observer.snapshots > 0
    assert observer.violations == [], "a stored offset moved backwards"
    result = verify_sessions(written, expected_sessions(fragments, WebSessions()), len(fragments))
    print(f"cut {cut}: {result.line()}; took {time.monotonic() - started:.1f} s")
    assert result.exact, result


def _assert_streams_pause(
    group: NodeGroup, zk: KazooClient, connection: ConnectionConfig, held: set[str], cut_at: float
) -> None:
    """Cut from Kafka only: for twice the session timeout and until the others caught up on
    the new traffic, the victim keeps exactly its streams, and they lag."""
    streams = streams_of(connection.app, STREAMS)

    def paused() -> bool:
        owners = claims_by_owner(zk, connection.paths)
        assert owners.get(VICTIM, set()) == held, (
            f"{VICTIM} lost claims while only Kafka was cut: held {sorted(held)}, "
            f"now {sorted(owners.get(VICTIM, set()))}"
        )
        states = read_states(zk, connection.paths, streams)
        ends = end_offsets(connection.bootstrap, streams)
        others_caught_up = all(
            states[s].committed_offset == ends[s] for s in streams if s not in held
        )
        victim_behind = any(states[s].committed_offset < ends[s] for s in held)
        window = time.monotonic() - cut_at >= 2 * SESSION_TIMEOUT
        return others_caught_up and victim_behind and window

    wait_for(answering(group, paused), 120, f"{VICTIM}'s streams to pause while the others go on")
