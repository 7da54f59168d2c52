"""A read-only snapshot of an app's balancing state in ZooKeeper (`sessionizer status`).

The shape is the `status --json` contract (DESIGN section 11):
`{"app", "consumers": [{"id", "streams"}], "streams": [{"name", "owner", ...}]}`;
each stream row also has `"corrupt"`: the reason its state is quarantined, or None.
`sessionizer status` adds a top-level `"auth"`: `"open"` for an app whose
znodes anyone may read and write, else the scheme of the identity they belong
to (`"digest"`), from the app root's ACL (`framework.zookeeper.root_acl_kind`);
the table then says so on its second line (`auth_line`).
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
from balancer.paths import AppPaths
from framework.zookeeper import OPEN

__all__ = ["StreamColumns", "auth_line", "format_table", "snapshot"]

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
    extra = columns(names) if columns else {}
    for row in rows:
        row.update(extra.get(row["name"], {}))
    return {
        "app": paths.app,
        "consumers": [{"id": m, "streams": s} for m, s in by_member.items()],
        "streams": rows,
    }


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
        "",
        f"{'CONSUMER':<24} {'STREAMS':>7}",
    ]
    lines += [f"{c['id']:<24} {len(c['streams']):>7}" for c in status["consumers"]]
    keys = [k for k in (streams[0] if streams else {}) if k not in _NOT_COLUMNS]
    width = max([len("STREAM"), *(len(row["name"]) for row in streams)])
    header = f"{'STREAM':<{width}} {'OWNER':<24}" + "".join(f" {k.upper():>12}" for k in keys)
    lines += ["", header]
    for row in streams:
        cells = "".join(f" {_cell(row.get(k)):>12}" for k in keys)
        lines.append(f"{row['name']:<{width}} {_owner(row):<24}{cells}")
    return "\n".join(lines + _corrupt_lines(corrupt))


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
