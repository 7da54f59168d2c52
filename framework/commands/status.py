"""`sessionizer status [-o table|wide|json] [--json] [--watch]`: who owns which stream, how far.

The default table fits an 80-column terminal (`balancer.status.format_table`):
each stream's owner, LAG (end offset - committed offset), OPEN sessions, DEAD
letters (when the rows carry them and they fit) and STATE; `-o wide` adds every
other column; `-o json` (or `--json`) prints the document of DESIGN section 11.
Each stream row has `corrupt`: the reason its state is quarantined, or null;
the table lists the reasons below it. The top-level `auth` is `"open"` (the app
was created without --zk-auth: anyone may read and write its znodes) or the
scheme its znodes are protected with (`"digest"`), from the app root's ACL; the
table says so on its second line. Each stream row has its published `load` and
`busy` and its `lag`, and the top level adds `balance` (the members' policy),
`settings` (what else the members announce they run: `delivery`, `hot_path`),
`node_loads` (each member's summed load) (`balancer.status.load_summary`) and
`errors`: what could not be read, one line each.

Exit status: 0; 1 when Kafka could not be read (what ZooKeeper holds is printed,
the offsets from Kafka are `-`/null, and stderr has one line saying so); 2 when
ZooKeeper cannot be read, or without the credentials of a protected app.
The Kafka and ZooKeeper clients' own lines are left out (unless --log-level debug,
`framework.commands.client_lines`):
they would repeat that one line once per retry.
`--watch` redraws under a timestamp: on a terminal it clears the screen, piped
it separates frames with a blank line; Ctrl-C ends it with 0: once the read in
flight is done (it is not drawn), or at once on a second Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import queue
import signal
import sys
from datetime import UTC, datetime
from types import FrameType
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.recipe.watchers import ChildrenWatch

from balancer.status import format_table, load_summary, snapshot, stream_lag
from framework.commands.client_lines import first_line
from framework.commands.interrupts import signals_calling
from framework.commands.options import connection_from_args
from framework.kafka.errors import ClientError
from framework.kernel.config import ConnectionConfig
from framework.kernel.zookeeper import app_client, root_acl_kind
from framework.node.config import AGREED, ANNOUNCED
from framework.node.resize_link import resize_line, resize_progress
from framework.progress import state_columns
from router.registry import streams_for

__all__ = ["EXIT_PARTIAL", "OUTPUTS", "StatusReader", "add_parser", "frame", "render", "run"]

EXIT_PARTIAL = 1
"""Exit status when ZooKeeper was read but Kafka could not be: the output is partial."""
OUTPUTS = ("table", "wide", "json")
"""`-o` choices: the 80-column table, every column, or the JSON document."""

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
        help="members, their streams and each stream's owner and lag",
        description="Reads the app's members and claims from ZooKeeper and the streams' end "
        "offsets from Kafka (read-only). Exit 1 when Kafka cannot be read (the rest is "
        "printed), 2 when ZooKeeper cannot.",
    )
    parser.add_argument(
        "-o",
        "--output",
        choices=OUTPUTS,
        default="table",
        help="table: fits 80 columns (default); wide: every column; json: as --json",
    )
    parser.add_argument("--json", action="store_true", help="print the status as JSON (-o json)")
    parser.add_argument(
        "--watch", action="store_true", help="redraw whenever claims or members change (Ctrl-C)"
    )
    parser.set_defaults(run=run, quiet_clients=True)


def run(args: argparse.Namespace) -> int:
    """Print the status once, or keep redrawing it with --watch until Ctrl-C."""
    connection = connection_from_args(args)
    output = "json" if args.json else getattr(args, "output", "table")
    with app_client(connection) as client:
        # The check `produce` makes (one line, exit 2): no empty table for an app
        # whose streams were never created.
        streams_for(client, connection.paths.active_streams, connection.app)
        if not args.watch:
            status = StatusReader(client, connection).read()
            print(render(status, output), flush=True)
            for error in status["errors"]:
                print(f"sessionizer status: error: {error}", file=sys.stderr, flush=True)
            return EXIT_PARTIAL if status["errors"] else 0
        return _watch(client, connection, output)  # the client is stopped after the loop left


class StatusReader:
    """Reads the `status --json` document; one per command, so that --watch reads each
    stream's dead letters incrementally (`framework.progress.state_columns`)."""

    def __init__(self, client: KazooClient, connection: ConnectionConfig) -> None:
        self._client, self._connection = client, connection
        self._errors: list[str] = []
        self._columns = state_columns(client, connection, self._kafka_failed)

    def read(self) -> dict[str, Any]:
        """The document, read now; its `errors` say what could not be read."""
        self._errors = []
        paths = self._connection.paths
        status = snapshot(self._client, paths, columns=self._columns)
        status.update(
            load_summary(self._client, paths, status, agreed=AGREED, announced=ANNOUNCED),
            auth=root_acl_kind(self._client, paths),
        )
        for row in status["streams"]:
            row["lag"] = stream_lag(row)
        status["resize"] = resize_progress(self._client, paths)
        status["errors"] = self._errors
        return status

    def _kafka_failed(self, exc: ClientError) -> None:
        self._errors.append(
            f"cannot read Kafka at {self._connection.bootstrap} ({first_line(exc, 160)}), so LAG "
            "and end offsets are unknown; is it up, and --bootstrap right?"
        )


def render(status: dict[str, Any], output: str) -> str:
    """The status as `output` (one of `OUTPUTS`) prints it."""
    if output == "json":
        return json.dumps(status, sort_keys=True)
    table = format_table(status, wide=output == "wide")
    progress = status.get("resize")
    return f"{table}\n{resize_line(progress)}" if progress else table


def frame(text: str, *, now: datetime, terminal: bool) -> str:
    """One --watch frame under a timestamp: the screen cleared on a terminal, else a blank
    line first, so frames read one after another in a pipe or a file."""
    header = f"{now:%Y-%m-%d %H:%M:%S} UTC (every {_REFRESH_SECONDS:g} s; Ctrl-C ends)"
    lead = _CLEAR if terminal else "\n"
    return f"{lead}{header}\n{text}"


def _watch(client: KazooClient, connection: ConnectionConfig, output: str) -> int:
    """Redraw until Ctrl-C; 0 then (the CLI contract), even if it cut a read short."""
    wakeup = _Wakeup()
    with signals_calling(wakeup.interrupt, [signal.SIGINT], only_over_default=True):
        try:
            _redraw(client, connection, output, wakeup)
        except KeyboardInterrupt:
            return 0  # a second Ctrl-C, or one the handler could not take (not the main thread)
        except KazooException:
            if wakeup.stopping:  # the read in flight when a second Ctrl-C came: it is dropped
                return 0
            raise
    return 0


def _redraw(
    client: KazooClient, connection: ConnectionConfig, output: str, wakeup: _Wakeup
) -> None:
    paths = connection.paths
    ChildrenWatch(client, paths.claimed_streams, wakeup.changed)
    ChildrenWatch(client, paths.active_consumers, wakeup.changed)
    if client.exists(paths.quarantined_streams) is not None:  # absent until a member starts
        ChildrenWatch(client, paths.quarantined_streams, wakeup.changed)
    terminal = sys.stdout.isatty()
    reader = StatusReader(client, connection)
    while not wakeup.stopping:
        status = reader.read()
        if wakeup.stopping:  # Ctrl-C came during the read: end without drawing it
            return
        text = render(status, output)
        if output != "json":  # JSON stays one document a line
            errors = [f"could not read: {error}" for error in status["errors"]]
            text = frame("\n".join([text, *errors]), now=datetime.now(UTC), terminal=terminal)
        print(text, flush=True)
        # Claims changing redraw at once; offsets move without any znode child
        # changing, so redraw every second as well.
        wakeup.wait(_REFRESH_SECONDS)


class _Wakeup:
    """What the --watch loop waits on between frames: a claims, members or quarantine
    change (`changed`, from kazoo's thread), or Ctrl-C (`interrupt`, the SIGINT handler).

    Ctrl-C must not raise KeyboardInterrupt wherever the main thread happens to be:
    inside a ZooKeeper request, kazoo's `KazooClient._call` (a bare `except:` around
    waking its connection thread) swallows it and fails the request with
    `ConnectionClosedError`, and the watch ended with exit 2 instead of 0.  So the
    first Ctrl-C only sets `stopping` and wakes the loop, which leaves after the read
    in flight; the client is stopped after that.  A second Ctrl-C raises
    KeyboardInterrupt, for a read that hangs (ZooKeeper or Kafka unreachable).

    A `queue.SimpleQueue`, not a `threading.Event`: its `put` may be called from a
    signal handler, while the handler setting an Event that the loop is clearing
    (holding the Event's lock) would deadlock.  (CPython 3.11's `SimpleQueue.get(timeout)`
    may wait past its timeout when a signal interrupts it, until a put: harmless here,
    where the one handler puts; `balancer.Balancer` waits on a `queue.Queue` for that.)
    """

    def __init__(self) -> None:
        self.stopping = False
        self._queue: queue.SimpleQueue[bool] = queue.SimpleQueue()

    def changed(self, _children: list[str]) -> None:
        self._queue.put(False)  # kazoo's thread: only wake the loop, it reads ZooKeeper

    def interrupt(self, _signum: int, _frame: FrameType | None) -> None:
        if self.stopping:
            raise KeyboardInterrupt
        self.stopping = True
        self._queue.put(True)

    def wait(self, timeout: float) -> None:
        """Until a change (however many came since the last wait), Ctrl-C or `timeout`."""
        try:
            self._queue.get(timeout=timeout)
            while True:
                self._queue.get_nowait()
        except queue.Empty:
            return
