"""The balancer against real ZooKeeper: members as `framework.testing.member` processes, plus a
few in-process `Balancer`s where the test must see the callbacks themselves.

Invariants checked throughout: every stream is claimed once by a live member
with a spread <= 1 once the group settles; the members' own logs agree with
ZooKeeper at those quiet points; while the group runs, a `ClaimObserver`
reading the claims continuously never sees a stream owned by anyone but the
member whose log says it holds it, and no committed state ever goes backwards.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import pytest
import structlog
from kazoo.client import KazooClient
from structlog.testing import capture_logs

from balancer import Balancer, BalancerConfig, BalancerState, NoopListener, StreamLease
from balancer.claims import release, take, take_each
from balancer.status import snapshot
from framework.cluster import LocalCluster
from framework.cluster.zookeeper_server import four_letter_word
from framework.commands import status as status_command
from framework.kernel.config import ConnectionConfig
from framework.kernel.paths import AppPaths
from framework.provision import provision_streams as create_streams
from framework.testing.members import (
    ClaimObserver,
    MemberGroup,
    ownership_violations,
    provision_streams,
    stream_names,
    wait_for,
)
from framework.testing.settling import settle
from state.errors import FencedError
from state.zookeeper_store import ZooKeeperRecords

pytestmark = pytest.mark.integration

SESSION_TIMEOUT = 4.0
# Generous upper bounds, only there so a broken build fails instead of hanging.
SETTLE = 45.0
WATCH = ("--watch", "--json")


def test_group_converges_rebalances_and_recovers(
    zk: KazooClient, zk_hosts: str, app: str, tmp_path: Path
) -> None:
    paths, names = AppPaths(app), stream_names(app, 64)
    provision_streams(zk, paths, names)
    with (
        MemberGroup(zk_hosts, app, tmp_path, session_timeout=SESSION_TIMEOUT) as group,
        ClaimObserver(zk_hosts, paths, names) as observer,
    ):
        nodes = [f"m{i}" for i in range(5)]
        for node in nodes:
            group.start(node)
        settle(group, zk, paths, nodes, 64)

        nodes += ["m5", "m6"]
        group.start("m5")
        group.start("m6")
        settle(group, zk, paths, nodes, 64)

        # SIGTERM: the member commits, releases everything at once and exits 0;
        # its streams move without waiting for its session to expire.
        leaver = group.members["m0"]
        leaver.send(signal.SIGTERM)
        assert leaver.wait(timeout=30) == 0
        assert leaver.assignment() == set()
        assert leaver.events("streams_released")
        nodes.remove("m0")
        settle(group, zk, paths, nodes, 64)

        # kill -9: its claims stay until ZooKeeper expires its session.
        crashed = group.members["m1"]
        crashed.send(signal.SIGKILL)
        crashed.wait(timeout=10)
        killed_at = time.time()
        nodes.remove("m1")
        settle(group, zk, paths, nodes, 64)
    assert observer.snapshots > 0
    assert observer.violations == []
    assert ownership_violations(group.members, observer, ended={"m1": killed_at}) == []


def test_paused_member_is_fenced_and_rejoins(
    zk: KazooClient, zk_hosts: str, app: str, tmp_path: Path
) -> None:
    paths, names = AppPaths(app), stream_names(app, 16)
    provision_streams(zk, paths, names)
    with (
        MemberGroup(zk_hosts, app, tmp_path, session_timeout=SESSION_TIMEOUT) as group,
        ClaimObserver(zk_hosts, paths, names) as observer,
    ):
        for node in ("a", "b", "c"):
            group.start(node)
        frozen = group.members["c"]
        held = settle(group, zk, paths, ["a", "b", "c"], 16)["c"]

        frozen.send(signal.SIGSTOP)
        # Its session expires; a and b take its streams and bump their epochs.
        taken = settle(group, zk, paths, ["a", "b"], 16)
        assert held <= taken["a"] | taken["b"]
        frozen.send(signal.SIGCONT)

        # It wakes believing it holds `held`: any commit it tries is rejected, and
        # it drops them all without committing before it rejoins.
        settle(group, zk, paths, ["a", "b", "c"], 16)
        dropped = {s for e in frozen.events("lost") for s in e["streams"]}
        rejected = {e["stream"] for e in frozen.events("commit_rejected")}
        assert held <= dropped | rejected
        assert frozen.events("joined")[-1]["timestamp"] > frozen.events("lost")[-1]["timestamp"]
        for node in ("a", "b"):  # the new owners were never fenced nor cut off
            assert group.members[node].events("commit_rejected") == []
            assert group.members[node].events("lost") == []
    assert observer.violations == []
    assert ownership_violations(group.members, observer) == []


def test_member_drains_one_stream_at_a_time_on_sigterm(
    zk: KazooClient, zk_hosts: str, app: str, tmp_path: Path
) -> None:
    paths, names = AppPaths(app), stream_names(app, 8)
    provision_streams(zk, paths, names)
    with MemberGroup(zk_hosts, app, tmp_path, session_timeout=SESSION_TIMEOUT) as group:
        group.start("stays")
        drainer = group.start("drains", drain=0.8)
        held = settle(group, zk, paths, ["stays", "drains"], 8)["drains"]
        drainer.send(signal.SIGTERM)
        assert drainer.wait(timeout=30) == 0
        assert [len(e["streams"]) for e in drainer.events("revoked")] == [1] * len(held)
        settle(group, zk, paths, ["stays"], 8)


def test_stale_owner_cannot_commit_or_release(zk_hosts: str, app: str) -> None:
    """Fencing at the smallest scale: a node whose session ended fails its commit (BadVersion)."""
    paths = AppPaths(app)
    stream = stream_names(app, 1)[0]
    old, new = KazooClient(hosts=zk_hosts), KazooClient(hosts=zk_hosts)
    old.start(timeout=30)
    new.start(timeout=30)
    try:
        provision_streams(old, paths, [stream])
        stale = take(old, paths, stream, "old", old.client_id[0])
        assert stale is not None
        old.restart()  # the session ends (claim gone) and a new one starts, as after expiry
        lease = take(new, paths, stream, "new", new.client_id[0])
        assert lease is not None and lease.epoch == stale.epoch + 1
        with pytest.raises(FencedError):
            ZooKeeperRecords(old, paths.stream_states).write(stream, b"stale", stale.epoch)
        # A stale release must not delete the new owner's claim either.
        assert release(old, paths, [stream], old.client_id[0]) == []
        assert new.exists(paths.claim(stream)) is not None
        fresh = ZooKeeperRecords(new, paths.stream_states).write(stream, b"fresh", lease.epoch)
        assert fresh == lease.epoch + 1
    finally:
        for client in (old, new):
            client.stop()
            client.close()


@contextlib.contextmanager
def _two_sessions(zk_hosts: str) -> Iterator[tuple[KazooClient, KazooClient, dict[str, int]]]:
    """Two ZooKeeper sessions, "a" and "b", and their session ids; closed after."""
    a, b = KazooClient(hosts=zk_hosts), KazooClient(hosts=zk_hosts)
    for client in (a, b):
        client.start(timeout=30)
    try:
        yield a, b, {"a": a.client_id[0], "b": b.client_id[0]}
    finally:
        for client in (a, b):
            client.stop()
            client.close()


def _race_takes(
    paths: AppPaths, sessions: dict[str, int], takers: dict[str, tuple[KazooClient, list[str]]]
) -> dict[str, tuple[str, StreamLease]]:
    """Run every taker's `take_each` at once; return each stream's one owner and its lease."""
    won: dict[str, dict[str, StreamLease | None]] = {}

    def race(node: str, client: KazooClient, order: list[str]) -> None:
        won[node] = dict(take_each(client, paths, order, node, sessions[node]))

    racers = [threading.Thread(target=race, args=(n, *taker)) for n, taker in takers.items()]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(timeout=60)
    assert set(won) == set(takers)
    owners: dict[str, tuple[str, StreamLease]] = {}
    for stream in next(iter(takers.values()))[1]:
        holders = [node for node in won if won[node][stream] is not None]
        assert len(holders) == 1, (stream, holders)
        lease = won[holders[0]][stream]
        assert lease is not None
        owners[stream] = (holders[0], lease)
    return owners


def test_two_sessions_taking_a_fresh_apps_streams_at_once_give_each_one_owner(
    zk_hosts: str, app: str
) -> None:
    """`take_each` creates a fresh app's state znodes all at once: two sessions doing so at
    the same time still give each stream one owner, whose lease is epoch 1."""
    paths = AppPaths(app)
    names = stream_names(app, 16)
    with _two_sessions(zk_hosts) as (a, b, sessions):
        provision_streams(a, paths, names)
        assert all(a.exists(paths.stream_state(s)) is None for s in names)
        owners = _race_takes(paths, sessions, {"a": (a, names), "b": (b, names[::-1])})
        for stream, (_, lease) in owners.items():
            state = a.exists(paths.stream_state(stream))
            assert state is not None and lease.epoch == state.version == 1


def test_pipelined_takes_give_each_stream_one_owner_and_its_epoch(zk_hosts: str, app: str) -> None:
    """`take_each` on fresh streams, then two sessions racing with every take in flight:
    each stream gets one owner, whose lease is its state version."""
    paths = AppPaths(app)
    names = stream_names(app, 24)
    with _two_sessions(zk_hosts) as (a, b, sessions):
        provision_streams(a, paths, names)
        first = dict(take_each(a, paths, names[:4], "a", sessions["a"]))
        second = dict(take_each(b, paths, names, "b", sessions["b"]))
        assert all(first[s] is not None and first[s].epoch == 1 for s in names[:4])
        assert [s for s in names if second[s] is None] == names[:4]  # a holds them
        assert release(a, paths, names[:4], sessions["a"]) == names[:4]
        assert sorted(release(b, paths, names[4:], sessions["b"])) == sorted(names[4:])

        owners = _race_takes(paths, sessions, {"a": (a, names[::-1]), "b": (b, names[::-1])})
        for stream, (owner, lease) in owners.items():
            claim = a.exists(paths.claim(stream))
            state = a.exists(paths.stream_state(stream))
            assert claim is not None and claim.ephemeralOwner == sessions[owner]
            assert state is not None and lease.epoch == state.version
            assert lease.epoch == 2  # one bump per take that won: the fresh one, then this one


class Recorder(NoopListener):
    """Records callbacks; checks inside `on_revoked` that the claims are still ours."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []
        self.balancer: Balancer | None = None

    def names(self, kind: str) -> list[list[str]]:
        return [streams for call, streams in self.calls if call == kind]

    def on_assigned(self, leases: Sequence[StreamLease]) -> None:
        self.calls.append(("assigned", [lease.stream for lease in leases]))

    def on_revoked(self, streams: Sequence[str]) -> None:
        assert self.balancer is not None
        session = self.balancer.client.client_id[0]
        for stream in streams:  # the owner's last commit happens here: claims still held
            claim = self.balancer.client.exists(self.balancer.paths.claim(stream))
            assert claim is not None and claim.ephemeralOwner == session
        self.calls.append(("revoked", list(streams)))

    def on_lost(self, streams: Sequence[str]) -> None:
        self.calls.append(("lost", list(streams)))

    def on_paused(self) -> None:
        self.calls.append(("paused", []))

    def on_resumed(self) -> None:
        self.calls.append(("resumed", []))


def member(hosts: str, app: str, node: str, client: KazooClient | None = None) -> Recorder:
    recorder = Recorder()
    config = BalancerConfig(hosts, app, node, session_timeout=SESSION_TIMEOUT, debounce=0.05)
    recorder.balancer = Balancer(config, recorder, client=client)
    recorder.balancer.start()
    return recorder


def pump(recorders: Sequence[Recorder], condition: Callable[[], object], what: str) -> None:
    """Drive the balancers from this thread until `condition` holds."""

    def step() -> object:
        for recorder in recorders:
            assert recorder.balancer is not None
            if recorder.balancer.state is not BalancerState.CLOSED:
                recorder.balancer.poll(0.01)
        return condition()

    wait_for(step, SETTLE, what, interval=0.0)


def test_callbacks_release_drain_and_close_in_process(
    zk: KazooClient, zk_hosts: str, app: str
) -> None:
    paths, names = AppPaths(app), stream_names(app, 6)
    provision_streams(zk, paths, names)
    a = member(zk_hosts, app, "a")
    b: Recorder | None = None
    try:
        assert a.balancer is not None
        pump([a], lambda: len(a.balancer.leases) == 6, "a to take all six")
        for lease in a.balancer.leases.values():  # the epoch is the state version our take made
            assert zk.exists(paths.stream_state(lease.stream)).version == lease.epoch

        b = member(zk_hosts, app, "b")
        assert b.balancer is not None
        pump([a, b], lambda: len(b.balancer.leases) == 3, "b to take its half")
        assert [len(r) for r in a.names("revoked")] == [3]

        b.balancer.drain(0.3)  # one stream at a time, then nothing
        pump([a, b], lambda: b.balancer.state is BalancerState.DRAINED, "b to drain")
        assert [len(r) for r in b.names("revoked")] == [1, 1, 1]
        pump([a, b], lambda: len(a.balancer.leases) == 6, "a to take them back")
        b.balancer.close()

        state_id = a.balancer.state_id
        a.balancer.close()  # everything at once, after the owner's last commit
        assert a.names("revoked")[-1] == sorted(names)
        assert a.balancer.state is BalancerState.CLOSED and a.balancer.state_id > state_id
        assert zk.get_children(paths.claimed_streams) == []
        assert zk.get_children(paths.active_consumers) == []
        assert not a.names("lost") and not b.names("lost")
    finally:
        for recorder in (a, b):
            if recorder is not None and recorder.balancer is not None:
                recorder.balancer.close()


def test_streams_added_to_the_app_are_taken_at_once_not_at_the_next_resync(
    zk: KazooClient, zk_hosts: str, app: str
) -> None:
    # A live resize (or `streams create` growing the app) adds `active_streams` children;
    # the members took the new streams only at their next periodic resync, up to 30 s on.
    paths, names = AppPaths(app), stream_names(app, 6)
    provision_streams(zk, paths, names[:4])
    config = BalancerConfig(
        zk_hosts, app, "a", session_timeout=SESSION_TIMEOUT, debounce=0.05, resync_interval=600
    )
    a = Recorder()
    a.balancer = Balancer(config, a)
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    try:
        with capture_logs() as logs:
            a.balancer.start()
            passes = lambda: [e for e in logs if e["event"] == "balance_pass"]  # noqa: E731
            # At rest: the four streams taken (at once: a fresh app's takes are pipelined,
            # so no claim event finds a stream free after them) and no pass due. Only the
            # new streams can start a pass before the resync.
            pump(
                [a],
                lambda: len(a.balancer.leases) == 4 and a.balancer.state is BalancerState.STABLE,
                "a to take the four streams and rest",
            )
            provision_streams(zk, paths, names[4:])
            pump([a], lambda: len(a.balancer.leases) == 6, "a to take the two new ones")
        assert passes()[-1]["streams"] == 6
    finally:
        structlog.configure(**saved)
        a.balancer.close()


def test_reported_fence_frees_the_claim_and_the_stream_is_taken_again(
    zk: KazooClient, zk_hosts: str, app: str
) -> None:
    paths, names = AppPaths(app), stream_names(app, 2)
    provision_streams(zk, paths, names)
    a = member(zk_hosts, app, "a")
    assert a.balancer is not None
    try:
        pump([a], lambda: len(a.balancer.leases) == 2, "a to take both")
        stream = names[0]
        old = a.balancer.leases[stream]
        zk.set(paths.stream_state(stream), b"moved by someone else")  # the epoch moves on
        with pytest.raises(FencedError, match=stream):
            ZooKeeperRecords(a.balancer.client, paths.stream_states).write(stream, b"x", old.epoch)
        a.balancer.report_fenced(stream)
        assert stream not in a.balancer.leases
        # Its claim was still ours: it is freed, and the only member takes it again.
        pump([a], lambda: stream in a.balancer.leases, "a to take it again")
        assert a.balancer.leases[stream].epoch == old.epoch + 2
    finally:
        a.balancer.close()


def test_failover_to_another_server_pauses_and_keeps_streams(
    zk_ensemble: LocalCluster, app: str
) -> None:
    hosts = zk_ensemble.zk_connect
    paths, names = AppPaths(app), stream_names(app, 4)
    first = zk_ensemble.server_names[0]
    # Pin the first server (kazoo shuffles hosts by default) so we know which to kill.
    client = KazooClient(hosts=hosts, timeout=SESSION_TIMEOUT, randomize_hosts=False)
    client.start(timeout=30)
    try:
        provision_streams(client, paths, names)
        a = member(hosts, app, "a", client=client)
        assert a.balancer is not None
        pump([a], lambda: len(a.balancer.leases) == 4, "a to take all four")
        before = dict(a.balancer.leases)
        zk_ensemble.kill(first)
        pump([a], lambda: a.names("resumed"), "a to pause, then resume on another server")
        kinds = [kind for kind, _ in a.calls]
        assert kinds.index("paused") < kinds.index("resumed")
        assert not a.balancer.paused
        assert dict(a.balancer.leases) == before  # same session: nothing lost or re-taken
        assert a.names("lost") == []
        a.balancer.close()
    finally:
        client.stop()
        client.close()


def test_status_snapshot_and_command(
    zk: KazooClient,
    zk_hosts: str,
    kafka_bootstrap: str,
    app: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    paths, names = AppPaths(app), stream_names(app, 3)
    # Topics too, and the recorded count: `status` reads both (and fails where it cannot).
    create_streams(ConnectionConfig(zk_hosts, kafka_bootstrap, app), len(names))
    a = member(zk_hosts, app, "a")
    assert a.balancer is not None
    watcher = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "framework.cli",
            "status",
            "--zk",
            zk_hosts,
            "--bootstrap",
            kafka_bootstrap,
            "--app",
            app,
            *WATCH,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        pump([a], lambda: len(a.balancer.leases) == 3, "a to take all three")
        status = snapshot(zk, paths)
        assert status["consumers"] == [{"id": "a", "streams": names}]
        assert [(row["name"], row["owner"]) for row in status["streams"]] == [
            (name, "a") for name in names
        ]
        args = argparse.Namespace(
            zk=zk_hosts, bootstrap=kafka_bootstrap, app=app, json=True, watch=False
        )
        assert status_command.run(args) == 0
        printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
        shown = json.loads(printed[-1])  # (logs share stdout in tests)
        # The balancer's columns; the progress columns are checked by the node tests.
        assert shown["consumers"] == status["consumers"]
        assert [{k: r[k] for k in ("name", "owner", "epoch")} for r in shown["streams"]] == [
            {k: r[k] for k in ("name", "owner", "epoch")} for r in status["streams"]
        ]

        # --watch redraws as claims change (one JSON line each) and ends cleanly on Ctrl-C.
        assert watcher.stdout is not None
        wait_for(
            lambda: json.loads(watcher.stdout.readline())["consumers"] == status["consumers"],
            SETTLE,
            "the watch to show a's streams",
        )
        watcher.send_signal(signal.SIGINT)
        assert watcher.wait(timeout=30) == 0
    finally:
        watcher.kill()
        watcher.wait()
        a.balancer.close()


def _connections(cluster: LocalCluster) -> dict[str, int]:
    """Client connections per ZooKeeper server (the `stat` reply lists one line per client)."""
    addresses = dict(zip(cluster.server_names, cluster.zk_connect.split(","), strict=False))
    return {name: four_letter_word(a, "stat").count("queued=") for name, a in addresses.items()}


def _resumes(group: MemberGroup, nodes: Iterable[str]) -> int:
    return sum(len(group.members[n].events("resumed")) for n in nodes)


def test_ensemble_failures_keep_a_consistent_assignment(
    zk_ensemble: LocalCluster, app: str, tmp_path: Path
) -> None:
    hosts = zk_ensemble.zk_connect
    paths, names = AppPaths(app), stream_names(app, 24)
    client = KazooClient(hosts=hosts, timeout=10.0)
    client.start(timeout=30)
    nodes = ["e1", "e2", "e3", "e4"]
    try:
        provision_streams(client, paths, names)
        with (
            MemberGroup(hosts, app, tmp_path, session_timeout=SESSION_TIMEOUT) as group,
            ClaimObserver(hosts, paths, names) as observer,
        ):
            baseline = _connections(zk_ensemble)  # our own client and the observer's
            for node in nodes:
                group.start(node)
            settle(group, client, paths, nodes, 24)

            # Members on the killed server are suspended, then fail over to another
            # server within their session: they keep their streams.
            members_on = {
                name: count - baseline[name] for name, count in _connections(zk_ensemble).items()
            }
            victim = max(members_on, key=lambda name: members_on[name])
            assert members_on[victim] > 0
            before = _resumes(group, nodes)
            zk_ensemble.kill(victim)
            wait_for(lambda: _resumes(group, nodes) > before, SETTLE, "a member to fail over")
            settle(group, client, paths, nodes, 24)
            zk_ensemble.start(victim)  # keep a quorum possible when the leader goes next

            # Losing the leader suspends every member until a new one is elected.
            leader = zk_ensemble.zk_leader()
            assert leader is not None
            before = _resumes(group, nodes)
            zk_ensemble.kill(leader)
            wait_for(lambda: _resumes(group, nodes) >= before + len(nodes), SETTLE, "all to resume")
            settle(group, client, paths, nodes, 24)
        assert observer.violations == []
        assert ownership_violations(group.members, observer) == []
    finally:
        client.stop()
        client.close()
