"""Chaos: 3 ZooKeeper servers, 3 brokers, 4 nodes, seeded random faults between traffic chunks.

Faults: `kill -9` a node (a replacement starts), SIGSTOP/SIGCONT a node (short,
or until the others took its streams), restart a broker (clean or after a
crash), restart a ZooKeeper server (sometimes the leader), and once a live
resize from 12 to 16 streams (docs/resize.md) among the others.  At the end the
output must be exact against the batch definition; with `--delivery
exactly-once` (the second variant) a `read_committed` reader must also find no
session twice and none lost, with no de-duplication (docs/delivery.md).

Marker `chaos` (CI runs both variants at the default, small size; the faults
one by one with exactly-once on both clients are in test_exactly_once_faults.py):

    SESSIONIZER_CHAOS_SEED=7 SESSIONIZER_CHAOS_FRAGMENTS=40000 pytest -m chaos -s

Before every chunk a few undecodable records go to random streams, and one fragment
dated an hour before the traffic whose fields `WebSessions` cannot read (a key of
its own): late on a stream with a stream time, a hook failure on one without.  Each
must come out as a dead letter (exactly one with exactly-once), the undecodable ones
holding their bytes, whatever the faults did meanwhile.

`SESSIONIZER_CHAOS_BALANCE=load` runs the nodes with `--balance load` (and a 5 s
`--balance-interval`, so load moves happen among the faults); the waits then ask
for every stream claimed, not for a spread <= 1.

The seed is printed first, and a one-line report last.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import msgpack
import pytest
from kafka import KafkaProducer

from framework.cluster import LocalCluster
from framework.dead_letters import TopicReader, read_letters
from framework.kernel.config import ConnectionConfig
from framework.kernel.zookeeper import zookeeper_client
from framework.provision import provision_streams
from framework.sessions import read_sessions
from framework.testing.exactly_once import no_open_transaction
from framework.testing.members import balanced, wait_for
from framework.testing.nodes import (
    NodeGroup,
    StateObserver,
    answering,
    node_story,
    settled,
    streams_of,
)
from framework.testing.traffic import produce
from framework.verify import differences, expected_sessions, verify_sessions
from router.generator import generate_fragments
from router.naming import deadletter_topic, sessions_topic, stream_name
from router.resize_command import start_resize
from sessionizer.examples.weblog import WebSessions

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

WEBLOG = "sessionizer.examples.weblog:WebSessions"
DEFAULT_SEED = 20130612
DEFAULT_FRAGMENTS = 5000
STREAMS = 12
NODES = 4
CHUNKS = 10  # traffic chunks; a fault before each chunk but the first
SESSION_TIMEOUT = 5.0
RESIZED = 16  # the count the one live resize grows the app to
Fault = Literal["kill9", "sigstop", "broker_restart", "zk_restart", "resize"]
FAULTS: tuple[Fault, ...] = ("kill9", "sigstop", "broker_restart", "zk_restart", "resize")
REPEATED: tuple[Fault, ...] = FAULTS[:-1]  # a resize happens once
POISON_PER_CHUNK = 2  # undecodable records written before each chunk (and one early fragment)
EARLY_MS = 60 * 60 * 1000  # how long before the traffic's first event the early fragments are


def _setting(name: str, default: int) -> int:
    raw = os.environ.get(name)
    try:
        return int(raw) if raw else default
    except ValueError:
        raise pytest.UsageError(f"{name} must be an integer, got {raw!r}") from None


def _balance_flags() -> tuple[tuple[str, ...], int | None]:
    """The nodes' balance flags and the claim spread to wait for, from SESSIONIZER_CHAOS_BALANCE."""
    policy = os.environ.get("SESSIONIZER_CHAOS_BALANCE") or "count"
    if policy == "count":
        return (), 1
    if policy == "load":
        return ("--balance", "load", "--balance-interval", "5"), None
    raise pytest.UsageError(f"SESSIONIZER_CHAOS_BALANCE must be count or load, got {policy!r}")


def _plan(rng: random.Random, count: int) -> list[Fault]:
    """`count` fault kinds: every kind once (shuffled) first, then any but a resize at random."""
    kinds = list(FAULTS)
    rng.shuffle(kinds)
    return (kinds + [rng.choice(REPEATED) for _ in range(count)])[:count]


class Chaos:
    """Applies faults to one cluster and node group; remembers what it did."""

    def __init__(
        self,
        rng: random.Random,
        cluster: LocalCluster,
        group: NodeGroup,
        flags: tuple[str, ...] = (),
        spread: int | None = 1,
        early_ms: int = 0,
    ) -> None:
        self.rng = rng
        self.cluster = cluster
        self.group = group
        self.streams = STREAMS  # the app's stream count: RESIZED once the resize started
        self.flags = flags  # every node's extra flags, replacements' too
        self.spread = spread  # the claim spread a wait asks for (None: every stream claimed)
        self.counts: Counter[str] = Counter()
        self.log: list[str] = []
        self.killed: set[str] = set()  # nodes killed on purpose (not expected to run)
        self.poisoned: list[bytes] = []  # the undecodable records written, in order
        self.early: list[bytes] = []  # the keys of the early fragments written, in order
        self.early_ms = early_ms  # their event time: before any of the traffic's
        self.stopped: str | None = None  # a SIGSTOPped node, to SIGCONT after the next chunk
        self._next = NODES + 1
        self._started = time.monotonic()

    def live(self) -> list[str]:
        """Nodes that should be running."""
        return [n for n in self.group.nodes if n not in self.killed]

    def inject(self, kind: Fault) -> None:
        """Apply one fault of `kind` to a target chosen at random."""
        self.counts[kind] += 1
        getattr(self, f"_{kind}")()

    def _note(self, what: str) -> None:
        line = f"{time.monotonic() - self._started:6.1f}s {what}"
        self.log.append(line)
        print(f"chaos: {line}", flush=True)

    def _kill9(self) -> None:
        victim = self.rng.choice(self.live())
        member = self.group.nodes[victim]
        member.send(signal.SIGKILL)
        member.wait(timeout=30)
        self.killed.add(victim)
        replacement = f"n{self._next}"
        self._next += 1
        self.group.start(replacement, *self.flags)
        self._note(f"kill -9 {victim}, started {replacement}")

    def _sigstop(self) -> None:
        victim = self.rng.choice(self.live())
        self.group.nodes[victim].send(signal.SIGSTOP)
        self.stopped = victim
        self._note(f"SIGSTOP {victim}")

    def resume_stopped(self, wait_for_takeover: bool, connection: ConnectionConfig) -> None:
        """SIGCONT the stopped node, at once or once the others took its streams."""
        victim, self.stopped = self.stopped, None
        if victim is None:
            return
        if wait_for_takeover:
            others = [n for n in self.live() if n != victim]
            with zookeeper_client(connection.zk) as zk:
                wait_for(
                    answering(
                        self.group,
                        live=self.live,
                        condition=lambda: balanced(
                            zk, connection.paths, others, self.streams, self.spread
                        ),
                    ),
                    120,
                    f"the others to take {victim}'s streams",
                )
        self.group.nodes[victim].send(signal.SIGCONT)
        self._note(f"SIGCONT {victim} ({'after takeover' if wait_for_takeover else 'short'})")

    def _broker_restart(self) -> None:
        name = self.rng.choice([f"kafka{i}" for i in (1, 2, 3)])
        if self.rng.random() < 0.5:
            self.cluster.kill(name)
            self.cluster.start(name)
            self._note(f"kill -9 and start {name}")
        else:
            self.cluster.restart(name)
            self._note(f"restart {name}")

    def _zk_restart(self) -> None:
        leader = self.cluster.zk_leader()
        if leader is not None and self.rng.random() < 0.5:
            name = leader
        else:
            name = self.rng.choice(["zk1", "zk2", "zk3"])
        self.cluster.restart(name)
        self._note(f"restart {name}{' (leader)' if name == leader else ''}")

    def poison(self, connection: ConnectionConfig) -> None:
        """Write `POISON_PER_CHUNK` records that are not msgpack to random streams, and one
        early fragment `WebSessions` fails on (before the traffic: it moves no stream time
        past any of the traffic's fragments)."""
        producer = KafkaProducer(bootstrap_servers=connection.bootstrap, acks="all")
        try:
            for _ in range(POISON_PER_CHUNK):
                value = b"\xc1 chaos poison %d" % len(self.poisoned)  # 0xc1: never msgpack
                stream = stream_name(connection.app, self.rng.randrange(self.streams))
                producer.send(stream, key=b"chaos-poison", value=value, partition=0).get(60)
                self.poisoned.append(value)
            key = b"chaos-early-%d" % len(self.early)
            value = msgpack.packb({"chaos": len(self.early)}, use_bin_type=True)  # no "ip"
            stream = stream_name(connection.app, self.rng.randrange(self.streams))
            producer.send(
                stream, key=key, value=value, partition=0, timestamp_ms=self.early_ms
            ).get(60)
            self.early.append(key)
        finally:
            producer.close()

    def _resize(self) -> None:
        # The next chunk's producer reads the new count and routes by it from its first
        # record; the nodes migrate the moved keys' open sessions meanwhile.
        epoch = start_resize(self.group.connection, RESIZED, replication=3)
        self.streams = epoch.new
        self._note(f"resize {epoch.old} -> {epoch.new} (epoch {epoch.epoch})")


@pytest.mark.parametrize("delivery", ["at-least-once", "exactly-once"])
def test_chaos_keeps_the_output_exact(
    local_cluster: Callable[..., LocalCluster], app: str, tmp_path: Path, delivery: str
) -> None:
    seed = _setting("SESSIONIZER_CHAOS_SEED", DEFAULT_SEED)
    size = _setting("SESSIONIZER_CHAOS_FRAGMENTS", DEFAULT_FRAGMENTS)
    print(
        f"\nchaos: seed {seed} (SESSIONIZER_CHAOS_SEED), {size} fragments, {delivery}, "
        f"balance {os.environ.get('SESSIONIZER_CHAOS_BALANCE') or 'count'}",
        flush=True,
    )
    rng = random.Random(seed)
    started = time.monotonic()
    fragments = list(generate_fragments(size // 2 + 1, seed=seed))[:size]
    chunk = -(-len(fragments) // CHUNKS)
    chunks = [fragments[i : i + chunk] for i in range(0, len(fragments), chunk)]

    cluster = local_cluster(zookeepers=3, brokers=3)
    connection = ConnectionConfig(cluster.zk_connect, cluster.bootstrap, app)
    provision_streams(connection, STREAMS, replication=3)
    with (
        NodeGroup(connection, tmp_path, WEBLOG, session_timeout=SESSION_TIMEOUT) as group,
        zookeeper_client(cluster.zk_connect) as zk,
        StateObserver(connection, streams_of(app, STREAMS)) as observer,
    ):
        balance_flags, spread = _balance_flags()
        flags = ("--delivery", delivery, *balance_flags)
        early_ms = fragments[0].timestamp_ms - EARLY_MS
        chaos = Chaos(rng, cluster, group, flags, spread, early_ms)
        try:
            for node in range(1, NODES + 1):
                group.start(f"n{node}", *chaos.flags)
            for number, (fault, part) in enumerate(
                zip([None, *_plan(rng, len(chunks) - 1)], chunks, strict=True)
            ):
                if fault is not None:
                    chaos.inject(fault)
                last = number == len(chunks) - 1
                chaos.poison(connection)
                produce(connection, chaos.streams, part, end=last)
                chaos.resume_stopped(rng.random() < 0.5, connection)
                if not last and rng.random() < 0.5:
                    # Sometimes a quiet point before the next fault, sometimes none.
                    wait_for(
                        answering(
                            chaos.group,
                            live=chaos.live,
                            condition=lambda: balanced(
                                zk, connection.paths, chaos.live(), chaos.streams, spread
                            ),
                        ),
                        120,
                        "balance",
                    )
            wait_for(
                answering(
                    chaos.group,
                    live=chaos.live,
                    condition=lambda: (
                        settled(
                            zk,
                            connection,
                            chaos.live(),
                            streams_of(app, chaos.streams),
                            spread,
                        )
                        and no_open_transaction(connection, sessions_topic(app))
                    ),
                ),
                300,
                "every stream caught up",
            )
            # Read while the nodes run: a node that must be killed at the end would leave its
            # open transactions holding `read_committed` readers back (exactly-once).
            written = read_sessions(connection.bootstrap, app, deduplicate=False)
            letters, by_key, early_reasons = _dead_letter_counts(connection)
        except BaseException:
            print("chaos faults so far:\n" + "\n".join(chaos.log))
            print(f"node events:\n{node_story(group)}")
            raise
    result = verify_sessions(written, expected_sessions(fragments, WebSessions()), len(fragments))
    faults = ", ".join(f"{kind} {chaos.counts[kind]}" for kind in FAULTS)
    print(
        f"chaos report: {delivery}, seed {seed}, fragments {len(fragments)}, faults [{faults}], "
        f"sessions {result.sessions_found} (expected {result.expected}), lost {result.lost}, "
        f"extra {result.extra}, duplicates {result.duplicates}, differing duplicates "
        f"{result.conflicting_duplicates}, took {time.monotonic() - started:.0f} s"
    )
    if not result.exact:
        print(f"node events:\n{node_story(group)}")
        print("\n".join(differences(written, expected_sessions(fragments, WebSessions()), 40)))
    poison_letters = [letters[value] for value in chaos.poisoned]
    early_letters = [by_key[key] for key in chaos.early]
    print(f"chaos poison: {len(chaos.poisoned)} written, dead letters {poison_letters}")
    print(
        f"chaos early: {len(chaos.early)} written, dead letters {early_letters} "
        f"({dict(early_reasons)})"
    )
    assert observer.violations == [], "a stored offset moved backwards"
    assert all(poison_letters), "an undecodable record has no dead letter"
    assert all(early_letters), "an early fragment has no dead letter (late or hook failure)"
    assert result.lost == 0, result
    assert result.conflicting_duplicates == 0, result
    assert result.exact, result
    if delivery == "exactly-once":  # committed output only, and no de-duplication needed
        assert result.duplicates == 0, result
        assert set(poison_letters) == {1}, "an undecodable record has a committed dead letter twice"
        assert set(early_letters) == {1}, "an early fragment has a committed dead letter twice"


def _dead_letter_counts(
    connection: ConnectionConfig,
) -> tuple[Counter[bytes], Counter[bytes], Counter[str]]:
    """How many committed dead letters hold each original value, each key, and the reasons
    of the early fragments' letters.

    A hook failure's letter for a fragment already folded has an empty value (its key
    and offset name it), so the early fragments, one key each, are counted by key.
    """
    reader = TopicReader(connection.bootstrap, {})
    try:
        letters = read_letters(reader, deadletter_topic(connection.app))
    finally:
        reader.close()
    values = Counter(stored.letter.value for stored in letters if stored.letter.value is not None)
    keys = Counter(stored.letter.key for stored in letters if stored.letter.key is not None)
    early = Counter(
        stored.letter.reason
        for stored in letters
        if (stored.letter.key or b"").startswith(b"chaos-early-")
    )
    return values, keys, early
