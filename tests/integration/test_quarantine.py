"""Corrupt state on real ZooKeeper (and Kafka for the CLI): quarantined once, shown, reset.

DESIGN section 5: a state record that cannot be decoded is quarantined: no node
takes the stream, `status` shows `corrupt` with the reason, and only `sessionizer
streams reset STREAM --from-offset N` repairs it.  Members are `framework.testing.member`
processes, whose own "decode" quarantines anything that is not their counter, or
in-process `Balancer`s where a test must see the callbacks or break ZooKeeper.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import pytest
from kafka import KafkaProducer
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss

from balancer import Balancer, BalancerConfig, NoopListener, StreamLease, quarantine
from balancer.claims import decode
from balancer.status import snapshot
from framework.kernel.config import ConnectionConfig
from framework.kernel.paths import AppPaths
from framework.provision import provision_streams as provision_topics
from framework.testing.cli import cli, cli_json
from framework.testing.members import (
    MemberGroup,
    provision_streams,
    stream_names,
    wait_for,
)
from framework.testing.settling import settle
from state.record import StreamState

pytestmark = pytest.mark.integration

SESSION_TIMEOUT = 4.0
SETTLE = 45.0
# Not msgpack behind a known marker byte, not JSON: what a disk or a hand edit might leave.
GARBAGE = b"\x07\x9c\xff\x00 not a state record \x01\xfe"
REASON = "cannot decode: unknown marker byte 0x07"


def _events(group: MemberGroup, name: str, stream: str) -> list[dict]:
    """Every member's log lines `name` that concern `stream`."""
    found = []
    for member in group.members.values():
        for event in member.events(name):
            if event.get("stream") == stream or stream in event.get("streams", ()):
                found.append(event)
    return found


def _produce(bootstrap: str, topic: str, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for i in range(count):
            producer.send(topic, f"record {i}".encode())
        producer.flush(timeout=30)
    finally:
        producer.close()


def test_corrupt_state_is_quarantined_once_shown_and_reset_by_the_operator(
    zk: KazooClient, zk_hosts: str, kafka_bootstrap: str, app: str, tmp_path: Path
) -> None:
    connection = ConnectionConfig(zk_hosts, kafka_bootstrap, app)
    provision_topics(connection, 8)
    paths, names = connection.paths, stream_names(app, 8)
    bad = names[3]
    _produce(kafka_bootstrap, bad, 5)  # its end offset is 5
    zk.create(paths.stream_state(bad), GARBAGE, makepath=True)
    run = {"zk": zk_hosts, "bootstrap": kafka_bootstrap, "app": app}
    nodes = ["q1", "q2", "q3"]
    with MemberGroup(zk_hosts, app, tmp_path, session_timeout=SESSION_TIMEOUT) as group:
        for node in nodes:
            group.start(node)
        owners = settle(group, zk, paths, nodes, 7)  # the 7 healthy ones, 3/2/2
        assert bad not in set().union(*owners.values())
        marker = decode(zk.get(paths.quarantined(bad))[0])
        assert set(marker) == {"reason", "node", "at"}
        assert marker["node"] in nodes and "not a counter nor a state record" in marker["reason"]

        # Churn makes every member re-run its balance passes: one more joins, then dies.
        # Nobody takes the quarantined stream again in any of those passes.
        takes = len(_events(group, "streams_taken", bad))
        group.start("q4")
        settle(group, zk, paths, [*nodes, "q4"], 7)
        group.members["q4"].send(signal.SIGKILL)
        assert group.members["q4"].wait(SETTLE) == -signal.SIGKILL
        settle(group, zk, paths, nodes, 7)
        assert zk.exists(paths.claim(bad)) is None
        assert len(_events(group, "streams_taken", bad)) == takes
        assert takes <= 2  # 1, unless a pass raced the first owner's marker (it finds it)
        made = [e for e in _events(group, "stream_quarantined", bad) if e["outcome"] == "created"]
        assert len(made) == 1
        assert not _events(group, "assigned", bad)  # no member ever used it
        settle(group, zk, paths, nodes, 7)

        rows = {row["name"]: row for row in cli_json("status", "--json", **run)["streams"]}
        assert rows[bad]["corrupt"] == marker["reason"] and rows[bad]["owner"] is None
        assert rows[bad]["safe_offset"] is None and rows[bad]["end_offset"] == 5
        assert all(rows[name]["corrupt"] is None for name in names if name != bad)
        code, table, _ = cli("status", **run)
        assert code == 0 and f"{bad}: {marker['reason']}" in table
        assert any(line.split()[-1:] == ["corrupt"] for line in table.splitlines() if bad in line)

        refusals = [
            (("nope.stream.0000", "0"), "is not one of app"),
            ((bad, "-1"), "must be >= 0"),
            ((bad, "6"), "past the end of"),
        ]
        for (stream, offset), why in refusals:
            code, out, err = cli("streams", "reset", stream, "--from-offset", offset, **run)
            assert (code, out) == (2, "") and why in err and len(err.strip().splitlines()) == 1
        assert zk.get(paths.stream_state(bad))[0] == GARBAGE  # nothing was touched

        done = cli_json("streams", "reset", bad, "--from-offset", "5", **run)
        # Its record is corrupt: producers rebuilt from the log, which holds none of theirs.
        assert done.pop("producers") == [] and done.pop("producers_from")["scanned_from"] == 0
        assert done == {"stream": bad, "from_offset": 5, "was_corrupt": marker["reason"]}
        assert zk.exists(paths.quarantined(bad)) is None
        settle(group, zk, paths, nodes, 8)
        wait_for(lambda: _events(group, "assigned", bad), SETTLE, "a member to take it")
        # The member resumed its counter at the reset's offset and commits on from there.
        wait_for(
            lambda: decode(zk.get(paths.stream_state(bad))[0]).get("counter", 0) > 5,
            SETTLE,
            "the new owner to commit past offset 5",
        )
        rows = {row["name"]: row for row in cli_json("status", "--json", **run)["streams"]}
        assert rows[bad]["corrupt"] is None and rows[bad]["owner"] in nodes


def test_reset_of_a_healthy_owned_stream_fences_the_owner(
    zk: KazooClient, zk_hosts: str, kafka_bootstrap: str, app: str, tmp_path: Path
) -> None:
    connection = ConnectionConfig(zk_hosts, kafka_bootstrap, app)
    provision_topics(connection, 2)
    paths, names = connection.paths, stream_names(app, 2)
    run = {"zk": zk_hosts, "bootstrap": kafka_bootstrap, "app": app}
    with MemberGroup(zk_hosts, app, tmp_path, session_timeout=SESSION_TIMEOUT) as group:
        member = group.start("solo")
        settle(group, zk, paths, ["solo"], 2)
        version = zk.exists(paths.stream_state(names[0])).version
        done = cli_json("streams", "reset", names[0], "--from-offset", "0", **run)
        assert done.pop("producers") == [] and done.pop("producers_from")["records_scanned"] == 0
        assert done == {"stream": names[0], "from_offset": 0, "was_corrupt": None}
        # Its next commit is fenced; it gives the stream up and takes it again.
        wait_for(lambda: member.events("commit_rejected"), SETTLE, "the owner to be fenced")
        wait_for(
            lambda: len([e for e in member.events("assigned") if names[0] in e["streams"]]) == 2,
            SETTLE,
            "the owner to take it again",
        )
        settle(group, zk, paths, ["solo"], 2)
        assert zk.exists(paths.stream_state(names[0])).version > version + 1
        assert zk.exists(paths.quarantined_streams) is not None
        assert zk.get_children(paths.quarantined_streams) == []


class Quarantining(NoopListener):
    """Quarantines `bad` from inside `on_assigned` (as a node does) the first `times` times."""

    def __init__(self, bad: str, times: int = 1, before: Callable[[], None] | None = None) -> None:
        self.bad = bad
        self.times = times
        self.before = before
        self.calls: list[tuple[str, str]] = []
        self.balancer: Balancer | None = None

    def on_assigned(self, leases: Sequence[StreamLease]) -> None:
        assert self.balancer is not None
        for lease in leases:
            self.calls.append(("assigned", lease.stream))
            if lease.stream == self.bad and self.times > 0:
                self.times -= 1
                if self.before is not None:
                    self.before()
                self.balancer.quarantine(lease.stream, REASON)
                assert lease.stream not in self.balancer.leases

    def on_revoked(self, streams: Sequence[str]) -> None:
        self.calls += [("revoked", s) for s in streams]

    def on_lost(self, streams: Sequence[str]) -> None:
        self.calls += [("lost", s) for s in streams]

    def count(self, kind: str, stream: str) -> int:
        return self.calls.count((kind, stream))


def _start(hosts: str, app: str, node: str, listener: Quarantining) -> Balancer:
    config = BalancerConfig(hosts, app, node, session_timeout=SESSION_TIMEOUT, debounce=0.05)
    listener.balancer = Balancer(config, listener)
    listener.balancer.start()
    return listener.balancer


def _pump(balancers: Iterable[Balancer], condition: Callable[[], object], what: str) -> None:
    def step() -> object:
        for balancer in balancers:
            balancer.poll(0.01)
        return condition()

    wait_for(step, SETTLE, what, interval=0.0)


def _run_for(balancers: Iterable[Balancer], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for balancer in balancers:
            balancer.poll(0.01)


def test_quarantine_from_on_assigned_forgets_frees_and_excludes_the_stream(
    zk: KazooClient, zk_hosts: str, app: str
) -> None:
    paths, names = AppPaths(app), stream_names(app, 3)
    provision_streams(zk, paths, names)
    bad = names[1]
    a_owner, b_owner = Quarantining(bad), Quarantining(bad, times=0)
    a = _start(zk_hosts, app, "a", a_owner)
    b: Balancer | None = None
    try:
        _pump([a], lambda: zk.exists(paths.quarantined(bad)), "a to quarantine it")
        _pump([a], lambda: len(a.leases) == 2 and not zk.exists(paths.claim(bad)), "a to settle")
        marker = decode(zk.get(paths.quarantined(bad))[0])
        assert (marker["node"], marker["reason"]) == ("a", REASON)
        assert abs(marker["at"] - time.time()) < 60
        assert a_owner.count("revoked", bad) == a_owner.count("lost", bad) == 0
        assert bad not in a.leases and a.target == 2

        b = _start(zk_hosts, app, "b", b_owner)  # 2 healthy streams over 2 members: 1 each
        _pump([a, b], lambda: len(a.leases) == len(b.leases) == 1, "a and b to share")
        _run_for([a, b], 1.0)
        assert b_owner.count("assigned", bad) == 0 and a_owner.count("assigned", bad) == 1
        assert zk.exists(paths.claim(bad)) is None

        assert quarantine.clear(zk, paths, bad) == marker  # what `streams reset` ends with
        _pump([a, b], lambda: bad in a.leases or bad in b.leases, "the reset stream to be taken")
    finally:
        for balancer in (a, b):
            if balancer is not None:
                balancer.close()


def test_a_transient_error_while_quarantining_gives_the_stream_up_like_a_fence(
    zk: KazooClient, zk_hosts: str, app: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths, names = AppPaths(app), stream_names(app, 2)
    provision_streams(zk, paths, names)
    bad = names[0]

    def broken(*args: object, **kwargs: object) -> quarantine.Outcome:
        raise ConnectionLoss("connection dropped mid-request")

    monkeypatch.setattr(quarantine, "mark", broken)
    owner = Quarantining(bad)
    a = _start(zk_hosts, app, "a", owner)
    try:
        # Not raised to the owner; no marker; the claim is freed, and taken again.
        _pump([a], lambda: owner.count("assigned", bad) == 2, "a to take it again")
        assert zk.exists(paths.quarantined(bad)) is None
        assert owner.count("revoked", bad) == owner.count("lost", bad) == 0
        _pump([a], lambda: len(a.leases) == 2, "a to hold both")
    finally:
        a.close()


def test_a_record_rewritten_since_it_was_read_is_not_quarantined(
    zk: KazooClient, zk_hosts: str, app: str
) -> None:
    paths, names = AppPaths(app), stream_names(app, 1)
    provision_streams(zk, paths, names)
    bad = names[0]
    fresh = StreamState(bad, safe_offset=2, committed_offset=2).encode()
    # An operator's reset lands between the owner's read and its quarantine.
    owner = Quarantining(bad, before=lambda: zk.set(paths.stream_state(bad), fresh))
    a = _start(zk_hosts, app, "a", owner)
    try:
        _pump([a], lambda: owner.count("assigned", bad) == 2, "a to take it again")
        assert zk.exists(paths.quarantined(bad)) is None
        assert zk.get(paths.stream_state(bad))[0] == fresh
    finally:
        a.close()


def test_status_json_keeps_its_keys_and_adds_corrupt(zk: KazooClient, app: str) -> None:
    paths, names = AppPaths(app), stream_names(app, 2)
    provision_streams(zk, paths, names)
    zk.create(paths.quarantined(names[1]), json.dumps({"reason": "bad bytes"}).encode())
    status = snapshot(zk, paths)
    assert set(status) == {"app", "consumers", "streams"}
    assert [(r["name"], r["owner"], r["epoch"], r["corrupt"]) for r in status["streams"]] == [
        (names[0], None, None, None),
        (names[1], None, None, "bad bytes"),
    ]
