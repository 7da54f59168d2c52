"""`sessionizer streams create --count N`, `streams resize --count M` and
`streams reset STREAM --from-offset N`.

`resize` is the live resize of docs/resize.md: it grows the app from its current
count to M while producers and nodes run (`router.resize_command.start_resize`).
`reset` is the operator's repair of a stream whose state is quarantined as corrupt
(DESIGN section 5), and a way to move any stream to another offset.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from framework.commands.options import Command, Group, connection_from_args
from framework.kernel.errors import ConfigError
from framework.kernel.zookeeper import app_client
from framework.node.resize_link import resize_progress
from framework.provision import provision_streams, reset_stream
from router.registry import streams_for
from router.resize_command import start_resize

__all__ = ["STREAMS", "add_parser", "check_resize"]

SHRINK_REFUSED = (
    "shrinking is not offered by the command: producers require Kafka to hold exactly "
    "`count` stream topics, and the retired streams must stay owned until they are "
    "empty (docs/resize.md, 'What it cannot do')"
)


def _create_options(create: argparse.ArgumentParser) -> None:
    create.add_argument("--count", type=int, required=True, help="number of streams")
    create.add_argument("--replication", type=int, default=1, help="replication factor")


def _resize_options(resize: argparse.ArgumentParser) -> None:
    resize.add_argument(
        "--count",
        type=int,
        required=True,
        metavar="M",
        help="the new number of streams (more than the current count)",
    )
    resize.add_argument(
        "--replication", type=int, default=1, help="replication factor of the new stream topics"
    )


def _reset_options(reset: argparse.ArgumentParser) -> None:
    reset.add_argument("stream", metavar="STREAM", help="the stream's name, e.g. APP.stream.0003")
    reset.add_argument(
        "--from-offset",
        type=int,
        required=True,
        metavar="N",
        help="where the next owner starts reading (0 .. the stream's end offset)",
    )


def run_create(args: argparse.Namespace) -> int:
    """Create the streams, or check that the existing ones match --count."""
    if args.count < 1 or args.replication < 1:
        raise ConfigError("--count and --replication must be >= 1")
    connection = connection_from_args(args)
    created = provision_streams(connection, args.count, args.replication)
    print(json.dumps({"app": connection.app, "streams": args.count, "created": created}))
    return 0


def check_resize(app: str, current: int, count: int, previous: dict[str, Any] | None) -> None:
    """Refuse, with one line saying why, a resize the command cannot start.

    `previous` is `status`'s resize section (`resize_progress`): a resize starts only
    once the previous one is migrated and settled on every stream (docs/resize.md: two
    resizes at once end the first one's guarantees).
    """
    if count == current:
        raise ConfigError(f"app {app!r} already has {count} streams: nothing to resize")
    if count < current:
        raise ConfigError(f"app {app!r} has {current} streams, --count {count} would shrink it: "
                          f"{SHRINK_REFUSED}")  # fmt: skip
    if previous is not None and (
        previous["migrated"] < previous["sources"] or previous["settled"] < previous["targets"]
    ):
        raise ConfigError(
            f"app {app!r}: resize {previous['from']} -> {previous['to']} (epoch "
            f"{previous['epoch']}) is not settled yet ({previous['migrated']}/"
            f"{previous['sources']} streams migrated, {previous['settled']}/"
            f"{previous['targets']} settled); start the next one once `sessionizer status` "
            "shows it settled"
        )


def run_resize(args: argparse.Namespace) -> int:
    """Start a live resize to --count; print `{"app", "streams", "from", "created", "epoch"}`."""
    if args.count < 1 or args.replication < 1:
        raise ConfigError("--count and --replication must be >= 1")
    connection = connection_from_args(args)
    with app_client(connection) as client:
        current = streams_for(client, connection.paths.active_streams, connection.app)
        previous = resize_progress(client, connection.paths)
    check_resize(connection.app, current, args.count, previous)
    epoch = start_resize(connection, args.count, args.replication)
    done = {"app": connection.app, "streams": epoch.new, "from": epoch.old}
    print(json.dumps({**done, "created": epoch.new - epoch.old, "epoch": epoch.epoch}))
    return 0


def run_reset(args: argparse.Namespace) -> int:
    """Reset one stream; print `{"stream", "from_offset", "was_corrupt", "producers", ...}`."""
    if args.from_offset < 0:
        raise ConfigError(f"--from-offset must be >= 0, got {args.from_offset}")
    done = reset_stream(connection_from_args(args), args.stream, args.from_offset)
    print(json.dumps(done), flush=True)
    return 0


STREAMS = Group(
    "streams",
    help="provision the app's streams, resize them live, or reset one",
    actions=(
        Command(
            "create",
            run_create,
            help="create N single-partition stream topics and register them in ZooKeeper",
            options=_create_options,
            quiet_clients=True,
        ),
        Command(
            "resize",
            run_resize,
            help="grow the app to M streams while producers and nodes run (docs/resize.md)",
            description=(
                "Creates the new stream topics, writes a start marker to every stream and "
                "records the resize (from N, to M, a resize epoch) in ZooKeeper: producers "
                "then switch to M, and the keys whose stream changes move with their open "
                "sessions, each session keeping its id. Prints what it created and the epoch; "
                "`sessionizer status` shows the progress. Only growing: a shrink is refused. "
                "Start the next resize once `status` shows the previous one settled."
            ),
            options=_resize_options,
            quiet_clients=True,
        ),
        Command(
            "reset",
            run_reset,
            help="restart STREAM at an offset with a fresh state; lifts a corrupt-state quarantine",
            description=(
                "Writes a fresh state record for STREAM (safe and committed offset N, empty "
                "ignore list), which fences off its current owner, then lifts its quarantine. "
                "The only way to repair a stream whose state is corrupt. The next owner reads "
                "from N with no open sessions and an empty ignore list: records before N are "
                "skipped, and sessions that started before N are not continued. The stream's "
                "live producers as of N are kept (rebuilt from the state record and the log)."
            ),
            options=_reset_options,
            quiet_clients=True,
        ),
    ),
)
add_parser = STREAMS.register
