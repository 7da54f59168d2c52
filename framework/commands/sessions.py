"""`sessionizer sessions [--json]`: the finished sessions so far, de-duplicated, then exit."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from typing import Any, TextIO

from framework.commands.options import Command, connection_from_args, require_streams
from framework.sessions import read_sessions

__all__ = ["add_parser", "print_sessions"]


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="one JSON session per line")
    parser.add_argument(
        "--all", action="store_true", help="keep replayed duplicates (default: one per id)"
    )


def run(args: argparse.Namespace) -> int:
    """Read `<app>.sessions` up to its current end."""
    connection = connection_from_args(args)
    require_streams(connection)  # else the read would wait for a topic that never comes
    sessions = read_sessions(
        connection.bootstrap,
        connection.app,
        deduplicate=not args.all,
        properties=connection.kafka_config,
    )
    print_sessions(sessions, as_json=args.json)
    return 0


def print_sessions(
    sessions: Iterable[dict[str, Any]], *, as_json: bool, out: TextIO | None = None
) -> None:
    """One line per session on `out` (default stdout): JSON, or a summary for people.

    A reader that goes away (`| head`) raises `BrokenPipeError`; `framework.cli.main`
    turns that into a quiet exit.
    """
    out = out or sys.stdout
    for session in sessions:
        if as_json:
            print(json.dumps(session, sort_keys=True), file=out)
        else:
            print(
                f"{session['session_id']:<40} {session['key'][:40]:<40} "
                f"fragments={session['fragments']:<4} "
                f"duration_s={(session['last_ts'] - session['first_ts']) / 1000:.0f}",
                file=out,
            )
    out.flush()


SESSIONS = Command(
    "sessions",
    run,
    help="print the finished sessions so far and exit",
    options=_options,
    quiet_clients=True,
)
add_parser = SESSIONS.register
