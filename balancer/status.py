"""A read-only snapshot of an app's balancing state in ZooKeeper (`sessionizer status`).

The shape is the `status --json` contract (DESIGN section 11):
`{"app", "consumers": [{"id", "streams"}], "streams": [{"name", "owner", ...}]}`;
each stream row also has `"corrupt"`: the reason its state is quarantined, or None.
`sessionizer status` adds a top-level `"auth"`: `"open"` for an app whose
znodes anyone may read and write, else the scheme of the identity they belong
to (`"digest"`), from the app root's ACL (`framework.kernel.zookeeper.root_acl_kind`);
the table then says so on its second line (`auth_line`).
Each stream row also has `"load"` (fragments/s) and `"busy"` (processing s/s),
as its owner last published them to `stream_load/<stream>` (None before any);
each stream row also has `"replayed"` (records its last resume re-read before
new ones: 0 after a handover) and `"handover"` (whether that resume used one),
as its owner noted them on `active_streams/<stream>` (None before any);
`sessionizer status` adds at the top level (`load_summary`) `"balance"` (the
policy the members run: `"count"`, `"load"`, or both joined by `+` while they
disagree), `"settings"`: every other setting the members announce, those the app
must share (`BalancerConfig.agreed`; the node's `"delivery"`) and those each member
says of itself (`BalancerConfig.announced`; the node's `"hot_path"`), each member's
value, joined by `+` where they differ, and `"node_loads"`: each member's load, its
streams' loads summed with an unpublished one counted as the mean
(`balancer.load_plan.effective_loads`); empty before any load is published.
`format_table` renders all this for people: by default in `TABLE_WIDTH`
columns (stream, owner, `stream_lag`, open sessions, dead letters when they
fit, `stream_state`), with `wide` every column.
The balancer knows members, claims and epochs only; the state columns
(`safe_offset`, `committed_offset`, `end_offset`, `open_sessions`, `ignored`)
come from a `StreamColumns` function the caller passes in, so this package
never learns about Kafka or the state store.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from balancer import claims, quarantine
from balancer.load import StreamLoad, read_loads
from balancer.load_plan import effective_loads, node_loads
from framework.kernel.paths import AppPaths
from framework.kernel.zookeeper import OPEN

__all__ = [
    "TABLE_WIDTH",
    "StreamColumns",
    "auth_line",
    "format_table",
    "load_summary",
    "snapshot",
    "stream_lag",
    "stream_state",
]

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


def load_summary(
    client: KazooClient,
    paths: AppPaths,
    status: Mapping[str, Any],
    agreed: Sequence[str] = (),
    announced: Sequence[str] = (),
) -> dict[str, Any]:
    """`balance` (the members' policies), `settings` (the `agreed` and `announced`
    settings in their membership znodes) and `node_loads` for a `snapshot`."""
    members = [c["id"] for c in status["consumers"]]
    by_member = {c["id"]: c["streams"] for c in status["consumers"]}
    healthy = [row["name"] for row in status["streams"] if row.get("corrupt") is None]
    rates = {row["name"]: row["load"] for row in status["streams"] if row.get("load") is not None}
    announced_by = _announced(client, paths, members, ("balance", *agreed, *announced))
    policies = {value or "count" for value in announced_by.pop("balance")}  # none: the default
    settings = {name: sorted(v for v in values if v) for name, values in announced_by.items()}
    return {
        "balance": "+".join(sorted(policies)) or None,
        "settings": {name: "+".join(values) for name, values in settings.items() if values},
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


def _announced(
    client: KazooClient, paths: AppPaths, members: Sequence[str], names: Sequence[str]
) -> dict[str, set[str | None]]:
    """Per setting name, the values the members announced in their membership znodes (None
    for a member that announced none)."""
    pending = [client.get_async(paths.consumer(m)) for m in members]
    found: dict[str, set[str | None]] = {name: set() for name in names}
    for result in pending:
        try:
            data = claims.decode(result.get()[0])
        except NoNodeError:
            continue  # left between the listing and the read
        for name in names:
            value = data.get(name)
            found[name].add(None if value is None else str(value))
    return found


TABLE_WIDTH = 80
"""`format_table` fits a terminal this wide unless asked for every column (`wide`)."""

_MIN_OWNER = 8  # an owner column squeezed to fit is never narrower than this
_GAP = "  "
_SHOWN = ("name", "owner", "corrupt", "lag", "open_sessions", "dead_letters")
"""Row keys the default table shows (or shows otherwise); `wide` adds every other key."""


@dataclass(frozen=True)
class _Column:
    header: str
    cell: Callable[[Mapping[str, Any]], str]
    numeric: bool = True  # right-aligned; text is left-aligned


def stream_lag(row: Mapping[str, Any]) -> int | None:
    """`end_offset - committed_offset`: records the owner has not read yet (None: unknown)."""
    end, committed = row.get("end_offset"), row.get("committed_offset")
    if isinstance(end, int) and isinstance(committed, int):
        return max(0, end - committed)
    return None


def stream_state(row: Mapping[str, Any]) -> str:
    """`corrupt`, `unowned`, `caught-up` (lag 0), `behind`, or `owned` (lag unknown)."""
    if row.get("corrupt") is not None:
        return "corrupt"
    if row.get("owner") is None:
        return "unowned"
    lag = stream_lag(row)
    if lag is None:
        return "owned"
    return "caught-up" if lag == 0 else "behind"


def format_table(status: Mapping[str, Any], *, wide: bool = False, width: int = TABLE_WIDTH) -> str:
    """A plain-text rendering: one line per consumer, one per stream, then the corrupt ones.

    By default the stream table fits `width` columns: STREAM, OWNER, LAG
    (`stream_lag`), OPEN (open sessions), DEAD (dead letters, when the rows have
    them and they fit) and STATE (`stream_state`); an owner name too long is cut.
    `wide` adds every other column of the rows (EPOCH, LOAD, BUSY, SAFE_OFFSET, ...).
    The reasons of corrupt streams follow the table.
    """
    streams = status["streams"]
    claimed = sum(1 for row in streams if row["owner"] is not None)
    corrupt = [row for row in streams if row.get("corrupt") is not None]
    counts = f"{claimed} claimed" + (f", {len(corrupt)} corrupt" if corrupt else "")
    lines = [
        f"app {status['app']}: {_count(len(status['consumers']), 'consumer')}, "
        f"{_count(len(streams), 'stream')} ({counts})",
        *([auth_line(status["app"], status["auth"])] if "auth" in status else []),
        *_settings_line(status),
        "",
        *_consumer_lines(status["consumers"], status.get("node_loads") or {}),
        "",
        *_stream_lines(streams, wide=wide, width=width),
    ]
    return "\n".join(lines + _corrupt_lines(corrupt))


def _stream_lines(rows: Sequence[Mapping[str, Any]], *, wide: bool, width: int) -> list[str]:
    keys = list(dict.fromkeys(key for row in rows for key in row))
    columns = [
        _Column("STREAM", lambda row: str(row["name"]), numeric=False),
        _Column("OWNER", lambda row: _cell(row["owner"]), numeric=False),
    ]
    if "end_offset" in keys and "committed_offset" in keys:
        columns.append(_Column("LAG", lambda row: _cell(stream_lag(row))))
    if "open_sessions" in keys:
        columns.append(_Column("OPEN", lambda row: _cell(row.get("open_sessions"))))
    dead = _Column("DEAD", lambda row: _cell(row.get("dead_letters")))
    if "dead_letters" in keys:
        columns.append(dead)
    columns.append(_Column("STATE", stream_state, numeric=False))
    if wide:
        columns += [_key_column(key) for key in keys if key not in _SHOWN]
        return _render(columns, rows)
    lines = _render(columns, rows)
    if dead in columns and _widest(lines) > width:
        columns.remove(dead)  # wide shows it
        lines = _render(columns, rows)
    if _widest(lines) > width:  # long owner names: cut them (the CONSUMER lines show them whole)
        lines = _render(columns, rows, cut_owner=_widest(lines) - width)
    return lines


def _key_column(key: str) -> _Column:
    return _Column(key.upper(), lambda row: _cell(row.get(key)))


def _render(
    columns: Sequence[_Column], rows: Sequence[Mapping[str, Any]], cut_owner: int = 0
) -> list[str]:
    """Aligned lines; `cut_owner` > 0 narrows the OWNER column by that many characters."""
    table = [[column.header for column in columns]]
    table += [[column.cell(row) for column in columns] for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(columns))]
    if cut_owner > 0:
        owner = [column.header for column in columns].index("OWNER")
        widths[owner] = max(_MIN_OWNER, widths[owner] - cut_owner)
        for line in table:
            line[owner] = _cut(line[owner], widths[owner])
    return [
        _GAP.join(
            cell.rjust(w) if column.numeric else cell.ljust(w)
            for cell, w, column in zip(line, widths, columns, strict=True)
        ).rstrip()
        for line in table
    ]


def _widest(lines: Sequence[str]) -> int:
    return max((len(line) for line in lines), default=0)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 2] + ".."


def _settings_line(status: Mapping[str, Any]) -> list[str]:
    """`balance: count, delivery: exactly-once`: what the members run (none: no line)."""
    settings = {"balance": status.get("balance"), **(status.get("settings") or {})}
    shown = [f"{name}: {value}" for name, value in settings.items() if value]
    return [", ".join(shown)] if shown else []


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
        return f"app {app}: znodes open to anyone (created without --zk-auth)"
    return f"app {app}: znodes protected ({auth}): only their creator may use them"


def _corrupt_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    if not rows:
        return []
    hint = "CORRUPT: no node takes these; sessionizer streams reset STREAM --from-offset N"
    return ["", hint] + [f"{row['name']}: {row['corrupt']}" for row in rows]


def _cell(value: Any) -> str:
    """A value as people read it: `-` for none, yes/no, numbers without float noise."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        text = f"{value:.2f}".rstrip("0").rstrip(".")
        return "<0.01" if text == "0" and value > 0 else text
    return str(value)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"
