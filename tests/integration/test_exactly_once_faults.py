"""Exactly-once output under faults: `kill -9`, a SIGSTOP'd zombie, a broker restart (issue 22).

The real Apache log through 3 nodes with `--delivery exactly-once`, per Kafka
client.  A `read_committed` reader of `<app>.sessions` must find every session
of the batch definition exactly once: no de-duplication by `session_id`, 0
duplicates, 0 lost.  The zombie (SIGSTOPped until the others took its streams,
then woken while its transaction is open) must have its late transaction fenced
or aborted, and say so in its log (docs/exactly-once.md's events).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from framework.cluster import LocalCluster
from framework.kafka import open_transactional_producer
from framework.kafka.errors import ClientError
from framework.kernel.config import ConnectionConfig
from framework.kernel.zookeeper import zookeeper_client
from framework.provision import provision_streams
from framework.sessions import read_sessions
from framework.testing.cli import DATA
from framework.testing.exactly_once import isolation_ends, no_open_transaction
from framework.testing.members import balanced, claims_by_owner, wait_for
from framework.testing.nodes import (
    STORY_EVENTS,
    NodeGroup,
    answering,
    node_story,
    settled,
    streams_of,
)
from framework.testing.traffic import SteadyTraffic, produce
from framework.verify import expected_sessions, verify_sessions
from router.formats import parse_file
from router.fragment import ParsedFragment
from router.hashing import stream_for_key
from router.naming import sessions_topic
from router.readback import read_topics
from sessionizer.examples.weblog import WebSessions
from sessionizer.kafka_sink import OutputProducerSettings

pytestmark = pytest.mark.integration

WEBLOG = "sessionizer.examples.weblog:WebSessions"
STREAMS = 16
SESSION_TIMEOUT = 4.0
ZOMBIE_RATE = 500.0  # fragments/s while the zombie sleeps: its streams always have output
FENCED = ("producer_fenced", "transaction_aborted")
"""What a node logs when Kafka refuses or aborts its transaction (docs/exactly-once.md)."""
MEMBERS = ["n1", "n3", "n4"]
"""The nodes after the kill -9 (n2 dies, n4 joins)."""
EVENTS = STORY_EVENTS | set(FENCED) | {"streams_rewound", "transaction_broken"}
"""What the failure report shows of each node's log."""


def _fenced_events(group: NodeGroup, node: str, since: float) -> list[dict[str, object]]:
    events = [e for name in FENCED for e in group.nodes[node].events(name)]
    return [e for e in events if _at(e) >= since]


def _resumed(group: NodeGroup, nodes: list[str], since: float) -> set[str]:
    """The streams `nodes` resumed (took, state read, producer initialised) since `since`."""
    events = [e for n in nodes for e in group.nodes[n].events("stream_resumed")]
    return {str(e["stream"]) for e in events if _at(e) >= since}


def _at(event: dict[str, object]) -> float:
    return datetime.fromisoformat(str(event["timestamp"])).timestamp()


def _until_settled(
    group: NodeGroup, zk: KazooClient, nodes: list[str], what: str, timeout: float = 180
) -> None:
    """Balanced among `nodes`, caught up, and no transaction open on the sessions topic (a
    `read_committed` reader stops at the first open one); fails at once if a node died."""
    streams = streams_of(group.connection.app, STREAMS)
    wait_for(
        answering(
            group,
            lambda: (
                settled(zk, group.connection, nodes, streams)
                and no_open_transaction(group.connection, sessions_topic(group.connection.app))
            ),
            live=lambda: nodes,
        ),
        timeout,
        what,
    )


class _Phases:
    """How long each phase took (seconds), for the report line."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._last = time.monotonic()

    def done(self, name: str) -> None:
        now = time.monotonic()
        self.seconds[name] = now - self._last
        self._last = now

    def line(self) -> str:
        return ", ".join(f"{name} {seconds:.0f} s" for name, seconds in self.seconds.items())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One ZooKeeper and one broker for both clients' runs (each has its own app): CI time."""
    with LocalCluster(tmp_path_factory.mktemp("eo-faults"), zookeepers=1, brokers=1) as started:
        yield started


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_every_session_once_after_kill_9_a_zombie_and_a_broker_restart(
    cluster: LocalCluster, app: str, tmp_path: Path, client: str
) -> None:
    phases = _Phases()
    connection = ConnectionConfig(cluster.zk_connect, cluster.bootstrap, app)
    provision_streams(connection, STREAMS)
    fragments = parse_file(DATA / "apache_logs", "apache")
    cuts = [0, *(len(fragments) * p // 100 for p in (25, 45, 65)), len(fragments)]
    first, killed, restarted, zombie_part = (fragments[a:b] for a, b in pairwise(cuts))
    # A 3 s interval keeps each stream's output of the last seconds in an open transaction:
    # the kill -9 and the zombie then always leave one behind. A 6 s delivery timeout (not
    # 30) ends the commits the broker restart holds up sooner: every failure path, less wait.
    flags = (
        *("--delivery", "exactly-once", "--kafka-client", client),
        *("--commit-interval", "3", "--delivery-timeout", "6"),
    )
    with (
        NodeGroup(connection, tmp_path, WEBLOG, session_timeout=SESSION_TIMEOUT) as group,
        zookeeper_client(cluster.zk_connect) as zk,
    ):
        phases.done("topics")
        try:
            for node in ("n1", "n2", "n3"):
                group.start(node, *flags)
            produce(connection, STREAMS, first)
            _until_settled(group, zk, ["n1", "n2", "n3"], "3 exactly-once nodes to catch up")
            phases.done("start")
            _kill_9(group, zk, killed, flags)
            phases.done("kill -9")
            _broker_restart(group, zk, cluster, restarted, phases)
            phases.done("recovery")
            name, woke = _zombie(group, zk, zombie_part)
            _until_settled(group, zk, MEMBERS, "every stream caught up, the zombie back")
            phases.done("zombie")
            # Read while the nodes run: killing them at the end may leave transactions open.
            written = read_sessions(connection.bootstrap, app, deduplicate=False)
        except BaseException:
            print(f"node events:\n{node_story(group, EVENTS)}")
            print(f"transactions:\n{_transactions(connection)}")
            raise
        late = [e["event"] for e in _fenced_events(group, name, woke - 1)]
        result = verify_sessions(
            written, expected_sessions(fragments, WebSessions()), len(fragments)
        )
        print(f"\nexactly-once ({client}): {result.line()}; zombie {name}: {late}")
        print(f"phases: {phases.line()}; {_counts(group)}")
        if result.lost or result.extra or result.duplicates:
            lost = _lost_by_stream(written, fragments)
            print(f"lost sessions by stream: {lost}\n{_diagnosis(connection)}")
            print(f"node events:\n{node_story(group, EVENTS)}")
    assert late, "the zombie's late transaction was neither fenced nor aborted"
    assert result.lost == 0 and result.extra == 0, result
    assert result.duplicates == 0, result  # exactly once, with no de-duplication


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_a_producer_whose_transaction_cannot_end_closes_while_the_broker_is_away(
    cluster: LocalCluster, app: str, client: str
) -> None:
    """What a node does when a commit fails and its abort times out (a broker restart): it
    closes the producer at once and goes on. confluent-kafka 2.16's `Producer.close()` waits
    for that abort with no deadline: a node's loop hung in it (CI, confluent)."""
    provision_streams(ConnectionConfig(cluster.zk_connect, cluster.bootstrap, app), 1)
    topic = sessions_topic(app)
    threads = _os_threads()
    settings = OutputProducerSettings(cluster.bootstrap, f"{app}-close", 2.0, 2**20, 2**20, {})
    producer = open_transactional_producer(
        client,
        f"{app}.close",
        kafka_python=settings.kafka_python(),
        confluent=settings.confluent(),
    )
    try:
        producer.init(30)
        producer.begin()
        producer.send(topic, b"k", b"before the outage", partition=0)
        producer.commit(30)  # the partition's leader and the coordinator are known
        producer.begin()
        producer.send(topic, b"k", b"delivered, in the open transaction", partition=0)
        assert producer.flush(30) == []  # so the coordinator knows the transaction
        cluster.stop("kafka1")
        with pytest.raises(ClientError):  # queued past the delivery timeout: cannot commit
            for _ in range(100):
                producer.send(topic, b"k", b"during the outage", partition=0)
            producer.commit(10)
        with pytest.raises(ClientError):  # the coordinator is away
            producer.abort(2)
        assert producer.in_transaction
        closing = threading.Thread(target=producer.close, args=(0.0,), daemon=True)
        closing.start()
        wait_for(lambda: not closing.is_alive(), 30, f"{client}: close(0) with Kafka away")
        # Released, not only returned: the client's threads are gone.
        wait_for(lambda: _os_threads() <= threads, 30, f"{client}: its threads to end")
    finally:
        cluster.start("kafka1")


def _os_threads() -> int:
    """This process's threads, the clients' own (librdkafka's are not Python's) included."""
    return len(os.listdir("/proc/self/task"))


def _kill_9(
    group: NodeGroup, zk: KazooClient, part: list[ParsedFragment], flags: tuple[str, ...]
) -> None:
    """n2 dies with its latest output in open transactions; n4 joins."""
    produce(group.connection, STREAMS, part)
    group.nodes["n2"].send(signal.SIGKILL)
    group.nodes["n2"].wait(timeout=30)
    group.start("n4", *flags)
    _until_settled(group, zk, MEMBERS, "the takeover after kill -9")


def _broker_restart(
    group: NodeGroup,
    zk: KazooClient,
    cluster: LocalCluster,
    part: list[ParsedFragment],
    phases: _Phases,
) -> None:
    """The broker restarts with transactions open; then input after it, so settled means every
    stream committed a transaction since: the transaction coordinator is back before the
    zombie phase (a new owner's init_transactions waiting on it would let the zombie commit)."""
    half = len(part) // 2
    produce(group.connection, STREAMS, part[:half])
    cluster.restart("kafka1")  # mid-transaction: commits retry, or abort and rewind
    phases.done("broker restart")
    produce(group.connection, STREAMS, part[half:])
    _until_settled(group, zk, MEMBERS, "recovery from the broker restart")


def _zombie(group: NodeGroup, zk: KazooClient, part: list[ParsedFragment]) -> tuple[str, float]:
    """The busiest node sleeps (SIGSTOP) until its streams are taken and resumed elsewhere,
    then wakes with its transactions open; its name and when it woke."""
    connection = group.connection
    traffic = SteadyTraffic(connection, STREAMS, part, ZOMBIE_RATE)
    with traffic.running():  # ends with the end-of-input watermark
        wait_for(lambda: traffic.sent >= len(part) // 4, 60, "traffic to flow")
        # The busiest node: with output on its streams, transactions are open.
        owners = claims_by_owner(zk, connection.paths)
        name = max(MEMBERS, key=lambda n: len(owners.get(n, ())))
        zombie, owned, stopped = group.nodes[name], owners.get(name, set()), time.time()
        zombie.send(signal.SIGSTOP)
        others = [n for n in MEMBERS if n != name]
        # Resumed by their new owners: their init_transactions has fenced the zombie.
        wait_for(
            answering(
                group,
                lambda: (
                    _resumed(group, others, stopped) >= owned
                    and balanced(zk, connection.paths, others, STREAMS)
                ),
                live=lambda: others,
            ),
            120,
            f"{others} to take and resume the zombie's streams {sorted(owned)}",
        )
        woke = time.time()
        zombie.send(signal.SIGCONT)  # wakes believing it owns them, transaction open
        wait_for(
            lambda: _fenced_events(group, name, woke - 1), 60, f"the zombie to log one of {FENCED}"
        )
        # All of it, or the sessions of what is left unsent would count as lost.
        wait_for(lambda: traffic.left() == 0, 120, "the rest of the traffic")
    return name, woke


def _counts(group: NodeGroup) -> str:
    """How often the nodes logged each failure event of exactly-once."""
    counts = Counter(
        str(event["event"])
        for member in group.nodes.values()
        for event in member.events()
        if event.get("event") in (*FENCED, "transaction_broken", "streams_rewound")
    )
    return ", ".join(f"{name} {n}" for name, n in sorted(counts.items())) or "no failure events"


def _lost_by_stream(written: list[dict[str, Any]], fragments: list[ParsedFragment]) -> str:
    """How many sessions of the batch definition each stream is missing."""
    found = Counter((s["key"], s["first_ts"], s["last_ts"], s["fragments"]) for s in written)
    missing = expected_sessions(fragments, WebSessions()) - found
    counts = Counter(stream_for_key(key, STREAMS) for key, *_ in missing.elements())
    return ", ".join(f"{stream}: {n}" for stream, n in sorted(counts.items()))


def _diagnosis(connection: ConnectionConfig) -> str:
    """Where the sessions topic stands, and when each copy of a few duplicates was written."""
    topic = sessions_topic(connection.app)
    committed = read_topics(connection.bootstrap, [topic])[topic]
    everything = read_topics(connection.bootstrap, [topic], isolation_level="read_uncommitted")
    ends = isolation_ends(connection, topic)
    copies: dict[str, list[Any]] = {}
    for record in committed:
        copies.setdefault(json.loads(record.value)["session_id"], []).append(record)
    lines = [
        f"{topic}: last stable offset {ends['read_committed']}, end {ends['read_uncommitted']}; "
        f"{len(committed)} committed records, {len(everything[topic])} in the log"
    ]
    kept = {r.offset for r in committed}
    aborted = [r for r in everything[topic] if r.offset not in kept]
    if aborted:
        lost = {json.loads(r.value)["session_id"] for r in aborted} - set(copies)
        lines.append(
            f"{len(aborted)} aborted records ({len(lost)} of their sessions never committed), "
            f"written {_clock(min(r.timestamp for r in aborted))}"
            f"-{_clock(max(r.timestamp for r in aborted))}"
        )
    for session_id, records in [(k, v) for k, v in copies.items() if len(v) > 1][:5]:
        written_at = ", ".join(f"offset {r.offset} at {_clock(r.timestamp)}" for r in records)
        lines.append(f"duplicate {session_id}: {written_at}")
    return "\n".join(lines)


def _clock(timestamp_ms: int) -> str:
    return f"{datetime.fromtimestamp(timestamp_ms / 1000, UTC):%H:%M:%S.%f}"


def _transactions(connection: ConnectionConfig) -> str:
    """The producers with a transaction open on the sessions and state topics, and what the
    broker says of every transactional id (a failure report's)."""
    from kafka import KafkaAdminClient, TopicPartition

    topics = [sessions_topic(connection.app), f"{connection.app}.state"]
    try:
        admin = KafkaAdminClient(bootstrap_servers=connection.bootstrap)
    except Exception as exc:  # a report, whatever the broker does
        return f"(no admin client: {exc!r})"
    lines = []
    try:
        found = admin.describe_producers([TopicPartition(t, 0) for t in topics])
        for partition, state in found.items():
            open_ = [p for p in state.active_producers if p.current_transaction_start_offset >= 0]
            lines.append(f"{partition.topic}: open {open_}")
        listed = admin.list_transactions()
        lines.append(f"transactions: {listed}")
        lines.append(f"hanging: {admin.find_hanging_transactions()}")
    except Exception as exc:
        lines.append(f"(admin failed: {exc!r})")
    finally:
        admin.close()
    return "\n".join(lines)
