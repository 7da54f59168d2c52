"""A read-only snapshot of an app's balancing state in ZooKeeper (`sessionizer status`).

The shape is the `status --json` contract (DESIGN section 11):
`{"app", "consumers": [{"id", "streams"}], "streams": [{"name", "owner", ...}]}`;
each stream row also has `"corrupt"`: the reason its state is quarantined, or None.
`sessionizer status` adds a top-level `"auth"`: `"open"` for an app whose
znodes anyone may read and write, else the scheme of the identity they belong
to (`"digest"`), from the app root's ACL (`framework.zookeeper.root_acl_kind`);
the table then says so on its second line (`auth_line`).
Each stream row also has `"load"` (fragments/s) and `"busy"` (processing s/s),
as its owner last published them to `stream_load/<stream>` (None before any);
each stream row also has `"replayed"` (records its last resume re-read before
new ones: 0 after a handover) and `"handover"` (whether that resume used one),
as its owner noted them on `active_streams/<stream>` (None before any);
`sessionizer status` adds at the top level (`load_summary`) `"balance"` (the
policy the members run: `"count"`, `"load"`, or both joined by `+` while they
disagree) and `"node_loads"`: each member's load, its streams' loads summed
with an unpublished one counted as the mean
(`balancer.load_plan.effective_loads`); empty before any load is published.
The table shows them as columns.
The balancer knows members, claims and epochs only; the state columns
(`safe_offset`, `committed_offset`, `end_offset`, `open_sessions`, `ignored`)
come from a `StreamColumns` function the caller passes in, so this package
never learns about Kafka or the state store.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from balancer import claims, quarantine
from balancer.load import StreamLoad, read_loads
from balancer.load_plan import effective_loads, node_loads
from balancer.paths import AppPaths
from framework.zookeeper import OPEN

__all__ = ["StreamColumns", "auth_line", "format_table", "load_summary", "snapshot"]

StreamColumns = Callable[[Sequence[str]], Mapping[str, Mapping[str, Any]]]
"""Given stream names, return extra columns per stream name (merged into each row)."""


def _children(client: KazooClient, path: str) -> list[str]:
    try:
        return sorted(client.get_children(path))
    except NoNodeError:
        return []


def snapshot(
    client: KazooClient, paths: AppPaths, *, columns: StreamColumns | None = None
) -> dict[str, Any]:
    """Members, their streams, and every stream's owner and epoch, read once."""
    members = _children(client, paths.active_consumers)
    try:
        owners = claims.read_owners(client, paths)
    except NoNodeError:
        owners = {}
    corrupt = quarantine.read_all(client, paths)
    names = sorted(set(_children(client, paths.active_streams)) | set(owners) | set(corrupt))
    by_member: dict[str, list[str]] = {member: [] for member in members}
    rows: list[dict[str, Any]] = []
    for name in names:
        claim = owners.get(name, {})
        owner = claim.get("consumer")
        if owner in by_member:
            by_member[owner].append(name)
        reason = corrupt[name].get("reason", "unknown") if name in corrupt else None
        rows.append({"name": name, "owner": owner, "epoch": claim.get("epoch"), "corrupt": reason})
    loads = read_loads(client, paths)
    for row in rows:
        row.update(_load_columns(loads.get(row["name"])))
    resumed = _resumed(client, paths, names)
    for row in rows:
        row.update(resumed.get(row["name"], {"replayed": None, "handover": None}))
    extra = columns(names) if columns else {}
    for row in rows:
        row.update(extra.get(row["name"], {}))
    return {
        "app": paths.app,
        "consumers": [{"id": m, "streams": s} for m, s in by_member.items()],
        "streams": rows,
    }


def load_summary(client: KazooClient, paths: AppPaths, status: Mapping[str, Any]) -> dict[str, Any]:
    """`balance` (the members' policies) and `node_loads` for a `snapshot` (`status` adds them)."""
    members = [c["id"] for c in status["consumers"]]
    by_member = {c["id"]: c["streams"] for c in status["consumers"]}
    healthy = [row["name"] for row in status["streams"] if row.get("corrupt") is None]
    rates = {row["name"]: row["load"] for row in status["streams"] if row.get("load") is not None}
    return {
        "balance": _policies(client, paths, members),
        "node_loads": _node_loads(by_member, healthy, rates),
    }


def _resumed(
    client: KazooClient, paths: AppPaths, names: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """How each stream was last resumed, as its owner noted it on `active_streams/<stream>`:
    `replayed` (records re-read before new ones) and `handover` (taken over from one)."""
    pending = [(name, client.get_async(paths.stream(name))) for name in names]
    found: dict[str, dict[str, Any]] = {}
    for name, result in pending:
        try:
            note = claims.decode(result.get()[0]).get("resumed")
        except (NoNodeError, ValueError):
            continue
        if isinstance(note, dict):
            found[name] = {"replayed": note.get("replayed"), "handover": note.get("handover")}
    return found


def _load_columns(load: StreamLoad | None) -> dict[str, float | None]:
    if load is None or load.rate is None:
        return {"load": None, "busy": None}
    return {"load": round(load.rate, 2), "busy": round(load.busy or 0.0, 4)}


def _node_loads(
    by_member: Mapping[str, Sequence[str]], streams: Sequence[str], rates: Mapping[str, float]
) -> dict[str, float]:
    if not rates:
        return {}
    effective = effective_loads(streams, rates)
    owned = {s: m for m, held in by_member.items() for s in held if s in effective}
    return {m: round(v, 2) for m, v in node_loads(owned, by_member, effective).items()}


def _policies(client: KazooClient, paths: AppPaths, members: Sequence[str]) -> str | None:
    """The `balance` the members announced in their membership znodes (None: no member)."""
    pending = [client.get_async(paths.consumer(m)) for m in members]
    found = set()
    for result in pending:
        try:
            found.add(str(claims.decode(result.get()[0]).get("balance", "count")))
        except NoNodeError:
            continue  # left between the listing and the read
    return "+".join(sorted(found)) or None


_NOT_COLUMNS = ("name", "owner", "corrupt")  # shown otherwise than as a column of their own


def format_table(status: Mapping[str, Any]) -> str:
    """A plain-text rendering: one line per consumer, one per stream, then the corrupt ones.

    A quarantined stream shows `corrupt` in the owner column (or `corrupt:<owner>`
    in the moment before its owner frees the claim); the reasons follow the table.
    """
    streams = status["streams"]
    claimed = sum(1 for row in streams if row["owner"] is not None)
    corrupt = [row for row in streams if row.get("corrupt") is not None]
    counts = f"{claimed} claimed" + (f", {len(corrupt)} corrupt" if corrupt else "")
    lines = [
        f"app {status['app']}: {len(status['consumers'])} consumers, "
        f"{len(streams)} streams ({counts})",
        *([auth_line(status["app"], status["auth"])] if "auth" in status else []),
        *([f"balance: {status['balance']}"] if status.get("balance") else []),
        "",
        *_consumer_lines(status["consumers"], status.get("node_loads") or {}),
    ]
    keys = [k for k in (streams[0] if streams else {}) if k not in _NOT_COLUMNS]
    width = max([len("STREAM"), *(len(row["name"]) for row in streams)])
    header = f"{'STREAM':<{width}} {'OWNER':<24}" + "".join(f" {k.upper():>12}" for k in keys)
    lines += ["", header]
    for row in streams:
        cells = "".join(f" {_cell(row.get(k)):>12}" for k in keys)
        lines.append(f"{row['name']:<{width}} {_owner(row):<24}{cells}")
    return "\n".join(lines + _corrupt_lines(corrupt))


def _consumer_lines(consumers: Sequence[Mapping[str, Any]], loads: Mapping[str, Any]) -> list[str]:
    """One line per consumer: its stream count, and its load once any load is published."""
    header = f"{'CONSUMER':<24} {'STREAMS':>7}" + (f" {'LOAD':>9}" if loads else "")
    lines = [header]
    for consumer in consumers:
        load = f" {_cell(loads.get(consumer['id'])):>9}" if loads else ""
        lines.append(f"{consumer['id']:<24} {len(consumer['streams']):>7}{load}")
    return lines


def auth_line(app: str, auth: str) -> str:
    """Whether the app's znodes are protected, given the kind of the app root's ACL."""
    if auth == OPEN:
        return f"app {app}: znodes open to anyone (created without ZooKeeper authentication)"
    return f"app {app}: znodes protected ({auth}): only the identity that created them"


def _owner(row: Mapping[str, Any]) -> str:
    if row.get("corrupt") is None:
        return _cell(row["owner"])
    return "corrupt" if row["owner"] is None else f"corrupt:{row['owner']}"


def _corrupt_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    if not rows:
        return []
    hint = "no node takes these; repair: sessionizer streams reset STREAM --from-offset N"
    return ["", f"CORRUPT ({hint})"] + [f"{row['name']}: {row['corrupt']}" for row in rows]


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)
