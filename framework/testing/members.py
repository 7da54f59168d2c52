"""Helpers to run `framework.testing.member` processes against real ZooKeeper and check the result.

Used by the integration tests and the convergence benchmark: a `MemberGroup`
spawns members and always reaps them, a `ClaimObserver` watches ZooKeeper from
its own session, and `balanced` / `wait_for` decide when the group converged.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError

from balancer import claims
from framework.kernel.paths import AppPaths
from framework.kernel.zookeeper import new_client
from framework.local_nodes import balanced, claims_by_owner
from framework.processes import MemberProcess, ProcessGroup

__all__ = [
    "ClaimObserver",
    "ClaimsSnapshot",
    "MemberGroup",
    "MemberProcess",
    "ProcessGroup",
    "balanced",
    "claims_by_owner",
    "ownership_violations",
    "provision_streams",
    "stream_names",
    "wait_for",
]

T = TypeVar("T")


def wait_for(condition: Callable[[], T], timeout: float, what: str, interval: float = 0.05) -> T:
    """Poll `condition` until it returns something truthy; raise `TimeoutError` naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.1f} s waiting for {what}")
        time.sleep(interval)


def stream_names(app: str, count: int) -> list[str]:
    """Stream names as provisioning writes them (`<app>.stream.NNNN`)."""
    return [f"{app}.stream.{i:04d}" for i in range(count)]


def provision_streams(client: KazooClient, paths: AppPaths, names: Iterable[str]) -> None:
    """Create the persistent `active_streams/<name>` znodes (the lead's provisioning does this)."""
    claims.ensure_layout(client, paths)
    for name in names:
        client.ensure_path(paths.stream(name))


class MemberGroup(ProcessGroup):
    """`framework.testing.member` processes of one app (the module is named, not imported).

    With `zk_auth` every member authenticates as that identity (through
    `SESSIONIZER_ZK_AUTH` in its environment).
    """

    def __init__(
        self,
        zk_hosts: str,
        app: str,
        directory: Path,
        *,
        session_timeout: float = 4.0,
        extra_args: Iterable[str] = (),
        zk_auth: str | None = None,
    ) -> None:
        super().__init__(directory)
        self.zk_hosts = zk_hosts
        self.app = app
        self.session_timeout = session_timeout
        self.extra_args = list(extra_args)
        self.zk_auth = zk_auth

    def start(self, node: str, *, drain: float | None = None) -> MemberProcess:
        """Spawn one member with id `node`."""
        command = [
            sys.executable, "-m", "framework.testing.member",
            "--zk", self.zk_hosts, "--app", self.app, "--id", node,
            "--session-timeout", str(self.session_timeout), *self.extra_args,
        ]  # fmt: skip
        if drain is not None:
            command += ["--drain", str(drain)]
        env = {} if self.zk_auth is None else {"SESSIONIZER_ZK_AUTH": self.zk_auth}
        return self.spawn(node, command, env=env, dumps_stacks=True)


ClaimsSnapshot = tuple[float, float, dict[str, str]]
"""(request sent, reply received, owner by stream) of one reading of the claims: it holds
every write ZooKeeper acknowledged (to anyone) before `sent` (`ClaimObserver` syncs first)."""


class ClaimObserver:
    """Reads claims and fake-state counters continuously from its own ZooKeeper session.

    Keeps every claims reading (`claims`, for `ownership_violations`) and
    records a violation whenever a stream's committed counter goes backwards:
    that is what a fenced-off owner writing over the new owner would look like.
    Each claims reading starts with a `sync`: ZooKeeper serves reads from the
    server a session is on, which may not have applied yet a write that another
    member's server already acknowledged (a follower lags the leader, the more
    so after an election), so without it a claim its member has logged as taken
    could read as missing: a double ownership that never was.
    Use as a context manager; `violations` is complete after exit.  `auth`
    (`SCHEME:CREDENTIALS`) is needed to observe an app created with --zk-auth.
    """

    def __init__(
        self, zk_hosts: str, paths: AppPaths, streams: list[str], *, auth: str | None = None
    ) -> None:
        self.zk_hosts = zk_hosts
        self.auth = auth
        self.paths = paths
        self.streams = streams
        self.violations: list[str] = []
        self.claims: list[ClaimsSnapshot] = []  # every observed claims listing
        self.snapshots = 0
        self._counters: dict[str, int] = {}
        self._done = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="claim-observer", daemon=True)

    def __enter__(self) -> ClaimObserver:
        self._thread.start()
        if not self._ready.wait(timeout=30):
            self.__exit__(None, None, None)
            raise TimeoutError(f"the observer could not connect to ZooKeeper at {self.zk_hosts}")
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._done.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        client = new_client(self.zk_hosts, auth=self.auth, session_timeout=10.0)
        client.start(timeout=30)
        self._ready.set()
        try:
            while not self._done.wait(0.05):
                try:
                    self._observe(client)
                except KazooException:
                    continue  # a server being killed on purpose: observe again later
        finally:
            client.stop()
            client.close()

    def _observe(self, client: KazooClient) -> None:
        sent = time.time()
        # Only after `sent`: the server catches up with the leader, so this reading holds
        # every claim taken (and logged as assigned) before `sent`.  Reads stay in order
        # for one session, so the counters below never go back because of a lagging server.
        client.sync(self.paths.claimed_streams)
        owners = {
            s: str(c.get("consumer")) for s, c in claims.read_owners(client, self.paths).items()
        }
        self.claims.append((sent, time.time(), owners))
        pending = [(s, client.get_async(self.paths.stream_state(s))) for s in self.streams]
        for stream, result in pending:
            try:
                counter = int(claims.decode(result.get()[0]).get("counter", 0))
            except NoNodeError:
                continue
            last = self._counters.get(stream, 0)
            if counter < last:
                self.violations.append(f"{stream}: counter went back from {last} to {counter}")
            self._counters[stream] = max(counter, last)
        self.snapshots += 1


Span = tuple[float, float, str, str]
"""(start, end, node, how it ended) of one member holding one stream, from its log."""


def ownership_violations(
    members: Mapping[str, MemberProcess],
    observer: ClaimObserver | None = None,
    ended: Mapping[str, float] | None = None,
) -> list[str]:
    """Moments when a member believed it held a stream that was not its own.

    A member holds a stream from its `assigned` line (the claim exists by
    then) until `revoked` (logged before the claim is deleted), `lost` or a
    fenced commit, or until `ended[node]`, the time it was killed.  Held spans
    that ended voluntarily must not overlap another member's span, and every
    claims snapshot the observer took wholly inside one must name that member.
    A member cut off by ZooKeeper (lost, fenced) learns it late, so its spans
    are exempt: fencing, checked by the observer's counters, protects them.
    """
    spans = _spans(members, ended or {})
    problems = []
    for stream, held in spans.items():
        held.sort()
        for i, (_, end, node, how) in enumerate(held):
            if how not in ("revoked", "end"):
                continue
            for start, _, other, _ in held[i + 1 :]:
                if start >= end:
                    break
                if other != node:
                    problems.append(f"{stream}: {other} took it while {node} still held it")
    if observer is not None:
        problems += _against_snapshots(spans, observer.claims)
    return problems


def _spans(
    members: Mapping[str, MemberProcess], ended: Mapping[str, float]
) -> dict[str, list[Span]]:
    spans: dict[str, list[Span]] = {}
    for node, member in members.items():
        held: dict[str, float] = {}
        for event in member.events():
            at = _seconds(event["timestamp"])
            for stream, how in _changes(event):
                if how == "start":
                    held[stream] = at
                elif stream in held:
                    spans.setdefault(stream, []).append((held.pop(stream), at, node, how))
        stop = ended.get(node, float("inf"))
        for stream, start in held.items():
            spans.setdefault(stream, []).append((start, stop, node, "end"))
    return spans


def _against_snapshots(spans: dict[str, list[Span]], snapshots: list[ClaimsSnapshot]) -> list[str]:
    problems = []
    for stream, held in spans.items():
        for start, end, node, how in held:
            if how not in ("revoked", "end"):
                continue
            for sent, received, owners in snapshots:
                if start <= sent and received <= end and owners.get(stream) != node:
                    problems.append(
                        f"{stream}: {node} held it while ZooKeeper said {owners.get(stream)}"
                    )
                    break
    return problems


def _changes(event: dict[str, Any]) -> list[tuple[str, str]]:
    name = event.get("event")
    if name == "assigned":
        return [(s, "start") for s in event["streams"]]
    if name in ("revoked", "lost"):
        return [(s, name) for s in event["streams"]]
    if name == "commit_rejected" and event.get("reason") == "fenced":
        return [(event["stream"], "fenced")]
    return []


def _seconds(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp).timestamp()
