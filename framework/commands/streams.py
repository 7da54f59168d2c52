"""`sessionizer streams create --count N` and `sessionizer streams reset STREAM --from-offset N`.

`reset` is the operator's repair of a stream whose state is quarantined as corrupt
(DESIGN section 5), and a way to move any stream to another offset.
"""

from __future__ import annotations

import argparse
import json

from framework.commands.options import connection_from_args
from framework.kernel.errors import ConfigError
from framework.provision import provision_streams, reset_stream

__all__ = ["add_parser"]


def add_parser(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    """Register `streams create` and `streams reset`."""
    parser = subparsers.add_parser("streams", help="provision the app's streams, or reset one")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser(
        "create",
        parents=[common],
        help="create N single-partition stream topics and register them in ZooKeeper",
    )
    create.add_argument("--count", type=int, required=True, help="number of streams")
    create.add_argument("--replication", type=int, default=1, help="replication factor")
    create.set_defaults(run=run_create)
    reset = actions.add_parser(
        "reset",
        parents=[common],
        help="restart STREAM at an offset with a fresh state; lifts a corrupt-state quarantine",
        description=(
            "Writes a fresh state record for STREAM (safe and committed offset N, empty "
            "ignore list), which fences off its current owner, then lifts its quarantine. "
            "The only way to repair a stream whose state is corrupt. The next owner reads "
            "from N with no open sessions and an empty ignore list: records before N are "
            "skipped, and sessions that started before N are not continued. The stream's "
            "live producers as of N are kept (rebuilt from the state record and the log)."
        ),
    )
    reset.add_argument("stream", metavar="STREAM", help="the stream's name, e.g. APP.stream.0003")
    reset.add_argument(
        "--from-offset",
        type=int,
        required=True,
        metavar="N",
        help="where the next owner starts reading (0 .. the stream's end offset)",
    )
    reset.set_defaults(run=run_reset)


def run_create(args: argparse.Namespace) -> int:
    """Create the streams, or check that the existing ones match --count."""
    if args.count < 1 or args.replication < 1:
        raise ConfigError("--count and --replication must be >= 1")
    connection = connection_from_args(args)
    created = provision_streams(connection, args.count, args.replication)
    print(json.dumps({"app": connection.app, "streams": args.count, "created": created}))
    return 0


def run_reset(args: argparse.Namespace) -> int:
    """Reset one stream; print `{"stream", "from_offset", "was_corrupt", "producers", ...}`."""
    if args.from_offset < 0:
        raise ConfigError(f"--from-offset must be >= 0, got {args.from_offset}")
    done = reset_stream(connection_from_args(args), args.stream, args.from_offset)
    print(json.dumps(done), flush=True)
    return 0
