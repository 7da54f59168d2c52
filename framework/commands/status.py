"""`sessionizer status [--json] [--watch]`: who owns which stream, from ZooKeeper.

Each stream row has `corrupt`: the reason its state is quarantined, or null;
the table shows `corrupt` as the owner and lists the reasons below it. The
top-level `auth` is `"open"` (the app was created without --zk-auth: anyone may
read and write its znodes) or the scheme its znodes are protected with
(`"digest"`), from the app root's ACL; the table says so on its second line.
Each stream row has its published `load` and `busy`, and the top level adds
`balance` (the members' policy) and `node_loads` (each member's summed load)
(`balancer.status.load_summary`). Without the credentials of a protected app,
status fails with one line.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading

from kazoo.client import KazooClient
from kazoo.recipe.watchers import ChildrenWatch

from balancer.paths import AppPaths
from balancer.status import StreamColumns, format_table, load_summary, snapshot
from framework.commands.options import connection_from_args
from framework.errors import ConfigError
from framework.progress import state_columns
from framework.zookeeper import app_client, root_acl_kind

__all__ = ["add_parser", "run"]

_CLEAR = "\x1b[H\x1b[2J"  # cursor home, clear screen
_REFRESH_SECONDS = 1.0


def add_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser | None = None,
) -> None:
    """Register `status`."""
    parser = subparsers.add_parser(
        "status",
        parents=[common] if common else [],
        help="members, their streams and each stream's owner",
        description="Reads the app's members and claims from ZooKeeper (read-only).",
    )
    parser.add_argument("--json", action="store_true", help="print the status as JSON")
    parser.add_argument(
        "--watch", action="store_true", help="redraw whenever claims or members change (Ctrl-C)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print the status once, or keep redrawing it with --watch until Ctrl-C."""
    connection = connection_from_args(args)
    paths = connection.paths
    with app_client(connection) as client:
        columns = state_columns(client, connection)
        if client.exists(paths.root) is None:
            raise ConfigError(
                f"app {args.app} has nothing in ZooKeeper at {args.zk} ({paths.root}); "
                "create its streams first (`sessionizer streams create`) or check --app"
            )
        if not args.watch:
            _show(client, paths, columns, as_json=args.json, clear=False)
            return 0
        try:
            _watch(client, paths, columns, as_json=args.json)
        except KeyboardInterrupt:
            return 0  # Ctrl-C is how --watch ends
    return 0


def _show(
    client: KazooClient,
    paths: AppPaths,
    columns: StreamColumns | None,
    *,
    as_json: bool,
    clear: bool,
) -> None:
    status = snapshot(client, paths, columns=columns)
    status.update(load_summary(client, paths, status), auth=root_acl_kind(client, paths))
    if as_json:
        print(json.dumps(status, sort_keys=True), flush=True)
    else:
        print((_CLEAR if clear else "") + format_table(status), flush=True)


def _watch(
    client: KazooClient, paths: AppPaths, columns: StreamColumns | None, *, as_json: bool
) -> None:
    changed = threading.Event()

    def mark(_children: list[str]) -> None:
        changed.set()  # kazoo's thread: only flag, the loop below reads ZooKeeper

    ChildrenWatch(client, paths.claimed_streams, mark)
    ChildrenWatch(client, paths.active_consumers, mark)
    if client.exists(paths.quarantined_streams) is not None:  # absent until a member starts
        ChildrenWatch(client, paths.quarantined_streams, mark)
    clear = sys.stdout.isatty() and not as_json
    while True:
        # Claims changing redraw at once; offsets move without any znode child
        # changing, so redraw every second as well.
        changed.wait(timeout=_REFRESH_SECONDS)
        changed.clear()
        _show(client, paths, columns, as_json=as_json, clear=clear)
