"""ZooKeeper operations on the app's layout: membership, claims and overflow slots.

Every function here is a few requests on the caller's thread; none keeps state.
"Ours" always means: the znode's ephemeral owner is our *current* session id,
because after a session is lost, an ephemeral znode of the same name may
belong to someone else.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.interfaces import IAsyncResult
from kazoo.protocol.states import ZnodeStat

from balancer.fencing import StreamLease
from framework.kernel.paths import AppPaths
from framework.kernel.safe_json import loads_object
from framework.kernel.zookeeper import ensure_app

__all__ = [
    "MEMBER_FIELDS",
    "claim_slot",
    "decode",
    "delete_if_ours",
    "disagreeing",
    "encode",
    "ensure_layout",
    "join",
    "member_info",
    "owned",
    "read_owners",
    "release",
    "take",
    "take_each",
    "taken_slots",
]

# A take retries when a straggler's fenced commit raced it (BadVersion on our bump).
_TAKE_ATTEMPTS = 3


def encode(value: dict[str, Any]) -> bytes:
    """Znode data is compact JSON, readable with zkCli."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


def decode(data: bytes | None) -> dict[str, Any]:
    """Decode znode data written by `encode`; anything else reads as empty (never raises:
    `framework.kernel.safe_json` bounds its size, depth and numbers)."""
    value = loads_object(data)
    return {} if value is None else value


MEMBER_FIELDS = ("host", "pid", "started", "capacity")
"""What every membership znode says of its member (`member_info`)."""


def member_info(capacity: int | None) -> dict[str, Any]:
    """The data of a membership znode."""
    values = (socket.gethostname(), os.getpid(), round(time.time(), 3), capacity)
    return dict(zip(MEMBER_FIELDS, values, strict=True))


def ensure_layout(client: KazooClient, paths: AppPaths) -> None:
    """Create the parent znodes the balancer uses, if missing, with the client's ACL.

    Raises `framework.kernel.zookeeper.ZooKeeperAccessError` if the app's znodes belong
    to another identity (NoAuth).
    """
    ensure_app(client, paths, paths.parents)


def delete_if_ours(client: KazooClient, path: str, session: int) -> bool:
    """Delete an ephemeral znode only if our session owns it."""
    stat = client.exists(path)
    if stat is None or stat.ephemeralOwner != session:
        return False
    try:
        client.delete(path, version=stat.version)
    except (NoNodeError, BadVersionError):
        return False
    return True


def join(
    client: KazooClient, paths: AppPaths, consumer_id: str, info: dict[str, Any], session: int
) -> bool:
    """Create our membership znode; False while another session holds the id."""
    path = paths.consumer(consumer_id)
    try:
        client.create(path, encode(info), ephemeral=True)
        return True
    except NodeExistsError:
        stat = client.exists(path)
        return stat is not None and stat.ephemeralOwner == session


def disagreeing(
    client: KazooClient, paths: AppPaths, consumer_id: str, agreed: Mapping[str, str]
) -> dict[str, dict[str, str]]:
    """Per setting of `agreed`, the other members announcing another value, and theirs.

    A member that announces nothing for a setting is not counted (it predates it).
    """
    if not agreed:
        return {}
    others = [m for m in client.get_children(paths.active_consumers) if m != consumer_id]
    pending = [(m, client.get_async(paths.consumer(m))) for m in others]
    found: dict[str, dict[str, str]] = {}
    for member, result in pending:
        try:
            info = decode(result.get()[0])
        except NoNodeError:
            continue  # left between the listing and the read
        for name, ours in agreed.items():
            theirs = info.get(name)
            if theirs is not None and str(theirs) != ours:
                found.setdefault(name, {})[member] = str(theirs)
    return found


def take(
    client: KazooClient, paths: AppPaths, stream: str, consumer_id: str, session: int
) -> StreamLease | None:
    """Claim `stream` and bump its epoch in one transaction; None if someone holds it.

    The claim (ephemeral) and the version-checked rewrite of `stream_state`
    with the same bytes either both happen or neither does, so a claim always
    carries the epoch that fences the previous owner.
    """
    state_path = paths.stream_state(stream)
    for _ in range(_TAKE_ATTEMPTS):
        try:
            data, stat = client.get(state_path)
        except NoNodeError:
            with contextlib.suppress(NodeExistsError):  # another taker created it first
                client.create(state_path, b"")
            continue
        results = _claim_and_bump(client, paths, stream, consumer_id, session, data, stat).get()
        if not any(isinstance(r, Exception) for r in results):
            return StreamLease(stream, stat.version + 1)
        if isinstance(results[0], NodeExistsError):
            return None
    return None


def take_each(
    client: KazooClient, paths: AppPaths, streams: Sequence[str], consumer_id: str, session: int
) -> Iterator[tuple[str, StreamLease | None]]:
    """`take` each of `streams`, every read and then every transaction in flight at once.

    Yields each stream with its lease (None: someone holds it) as its outcome is
    known, in `streams` order. A node starting or taking over many streams waits
    about two round trips, not two per stream, and ZooKeeper writes the claims in
    one group of log appends. The streams of a fresh app (no state znode yet) have
    theirs created all at once and read again first: two round trips more, not
    three per stream. A stream whose state znode vanished meanwhile, or whose epoch
    bump raced a fenced commit, gets the one-at-a-time `take`.
    """
    read = _read_states(client, paths, streams)
    commits = []
    for stream in streams:
        found = read.get(stream)
        if found is None:
            commits.append((stream, 0, None))
            continue
        data, stat = found
        pending = _claim_and_bump(client, paths, stream, consumer_id, session, data, stat)
        commits.append((stream, stat.version + 1, pending))
    for stream, epoch, pending in commits:
        results = None if pending is None else pending.get()
        if results is not None and not any(isinstance(r, Exception) for r in results):
            yield stream, StreamLease(stream, epoch)
        elif results is not None and isinstance(results[0], NodeExistsError):
            yield stream, None
        else:
            yield stream, take(client, paths, stream, consumer_id, session)


def _read_states(
    client: KazooClient, paths: AppPaths, streams: Sequence[str]
) -> dict[str, tuple[bytes, ZnodeStat]]:
    """Each stream's state znode (data, stat), those missing created empty and read again;
    a stream whose znode cannot be read after that is left out."""
    reads = [(stream, client.get_async(paths.stream_state(stream))) for stream in streams]
    found: dict[str, tuple[bytes, ZnodeStat]] = {}
    missing = []
    for stream, pending in reads:
        try:
            found[stream] = pending.get()
        except NoNodeError:
            missing.append(stream)
    creates = [(s, client.create_async(paths.stream_state(s), b"")) for s in missing]
    for _, created in creates:
        with contextlib.suppress(NodeExistsError):  # another taker created it first
            created.get()
    again = [(stream, client.get_async(paths.stream_state(stream))) for stream in missing]
    for stream, pending in again:
        with contextlib.suppress(NoNodeError):  # gone again: `take` decides it
            found[stream] = pending.get()
    return found


def _claim_and_bump(
    client: KazooClient,
    paths: AppPaths,
    stream: str,
    consumer_id: str,
    session: int,
    data: bytes,
    stat: ZnodeStat,
) -> IAsyncResult:
    """Send the transaction of a take: create the claim (ephemeral, naming the new epoch)
    and rewrite `stream_state` with the same bytes, checked against the version read."""
    claim = {"consumer": consumer_id, "session": f"{session:#x}", "epoch": stat.version + 1}
    tx = client.transaction()
    tx.create(paths.claim(stream), encode(claim), ephemeral=True)
    tx.set_data(paths.stream_state(stream), data, version=stat.version)
    return tx.commit_async()


def release(
    client: KazooClient, paths: AppPaths, streams: Iterable[str], session: int
) -> list[str]:
    """Delete our claims on `streams` (all in one transaction when possible).

    Each delete is guarded by a check that the stream's state version has not
    moved since before we confirmed the claim is ours: a node that took the
    stream after our session died would have bumped it, so a stale release can
    never delete the new owner's claim.
    """
    guarded = _guards(client, paths, streams, session)
    if not guarded:
        return []
    if _delete_claims(client, paths, guarded):
        return [stream for stream, _, _ in guarded]
    return [g[0] for g in guarded if _delete_claims(client, paths, [g])]


def _guards(
    client: KazooClient, paths: AppPaths, streams: Iterable[str], session: int
) -> list[tuple[str, int | None, int]]:
    # Requests of one session are served in order: each state version is read
    # before the claim's owner is, which is what makes the guard sound.
    pending = [
        (s, client.exists_async(paths.stream_state(s)), client.exists_async(paths.claim(s)))
        for s in streams
    ]
    guarded = []
    for stream, state_async, claim_async in pending:
        state, claim = state_async.get(), claim_async.get()
        if claim is not None and claim.ephemeralOwner == session:
            guarded.append((stream, state.version if state else None, claim.version))
    return guarded


def _delete_claims(
    client: KazooClient, paths: AppPaths, guarded: Sequence[tuple[str, int | None, int]]
) -> bool:
    tx = client.transaction()
    for stream, state_version, claim_version in guarded:
        if state_version is not None:
            tx.check(paths.stream_state(stream), state_version)
        tx.delete(paths.claim(stream), claim_version)
    return not any(isinstance(r, Exception) for r in tx.commit())


def taken_slots(client: KazooClient, paths: AppPaths) -> set[int]:
    """Indices of the overflow slots someone holds."""
    return {int(c) for c in client.get_children(paths.overflow_streams) if c.isdigit()}


def claim_slot(client: KazooClient, paths: AppPaths, index: int, consumer_id: str) -> bool:
    """Try to take overflow slot `index` (first come, first served)."""
    try:
        client.create(paths.overflow(index), encode({"consumer": consumer_id}), ephemeral=True)
    except NodeExistsError:
        return False
    return True


def owned(client: KazooClient, paths: AppPaths, session: int) -> tuple[set[str], set[int]]:
    """The claims and overflow slots whose ephemeral owner is `session`."""
    claims = {n: paths.claim(n) for n in client.get_children(paths.claimed_streams)}
    slots = {
        n: paths.overflow(int(n))
        for n in client.get_children(paths.overflow_streams)
        if n.isdigit()
    }
    return _owned(client, claims, session), {int(n) for n in _owned(client, slots, session)}


def _owned(client: KazooClient, paths_by_name: dict[str, str], session: int) -> set[str]:
    pending = [(name, client.exists_async(path)) for name, path in paths_by_name.items()]
    return {n for n, result in pending if (stat := result.get()) and stat.ephemeralOwner == session}


def read_owners(client: KazooClient, paths: AppPaths) -> dict[str, dict[str, Any]]:
    """Every claim's decoded data (`consumer`, `session`, `epoch`), by stream."""
    names = client.get_children(paths.claimed_streams)
    pending = [(name, client.get_async(paths.claim(name))) for name in names]
    owners = {}
    for name, result in pending:
        try:
            owners[name] = decode(result.get()[0])
        except NoNodeError:
            continue  # released between the listing and the read
    return owners
