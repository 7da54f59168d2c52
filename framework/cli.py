"""The `sessionizer` command line (the contract of DESIGN section 11)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

import setproctitle
from kazoo.exceptions import KazooException

from framework.commands.client_lines import clients_quiet, first_line
from framework.commands.options import CommandParser, common_parser
from framework.kafka.errors import ClientError
from framework.kernel.client_settings import hide_secret_arguments
from framework.kernel.errors import SessionizerError
from framework.logging import configure_logging

__all__ = ["EXIT_BROKEN_PIPE", "build_parser", "main", "package_version"]

# Each module defines `add_parser(subparsers, common)`; the parser it adds sets `run`.
_COMMANDS = (
    "cluster",
    "streams",
    "produce",
    "status",
    "node",
    "sessions",
    "aggregate",
    "demo",
    "deadletters",
)

EXIT_BROKEN_PIPE = 141
"""Exit code when the reader of stdout went away (`| head`): 128 + SIGPIPE, as `cat` has."""


def package_version() -> str:
    """The installed distribution's version (`pip install` metadata)."""
    try:
        return version("sessionizer")
    except PackageNotFoundError:  # imported from a checkout that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, with one subparser per available command."""
    parser = CommandParser(
        prog="sessionizer", description="Stateful stream sessionization on Kafka and ZooKeeper."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    common = common_parser()
    for name in _COMMANDS:
        importlib.import_module(f"framework.commands.{name}").add_parser(subparsers, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `sessionizer` console script."""
    args = build_parser().parse_args(argv)
    _hide_secrets_from_process_title()
    configure_logging(args.log_level, args.log_format)
    command = getattr(args, "command_line", args.command)
    quiet = getattr(args, "quiet_clients", False) and args.log_level != "debug"
    try:
        with clients_quiet(quiet):
            return int(args.run(args) or 0)
    except SessionizerError as exc:
        if not (isinstance(exc, ClientError) and exc.client_class):
            print(f"sessionizer {command}: error: {exc}", file=sys.stderr)
            return 2
        return _no_answer(command, exc)  # the client's own error, as it raised it
    except KazooException as exc:
        return _no_answer(command, exc)
    except BrokenPipeError:
        return _reader_gone()
    except KeyboardInterrupt:
        return 130


def _no_answer(command: str, exc: BaseException) -> int:
    """A last resort for a client's own error: commands wrap these where they can say more."""
    print(
        f"sessionizer {command}: error: the cluster did not answer ({first_line(exc)}); "
        "check --zk / --bootstrap (or SESSIONIZER_ZK / SESSIONIZER_BOOTSTRAP) and that "
        "the servers are up",
        file=sys.stderr,
    )
    return 2


def _reader_gone() -> int:
    """stdout's reader closed the pipe (`| head`): end quietly, as Unix tools do.

    stdout is pointed at /dev/null first, so the interpreter's own flush at exit
    does not fail a second time and print a traceback.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass  # stdout is no file (an in-process caller's buffer): nothing left to flush
    return EXIT_BROKEN_PIPE


def _hide_secrets_from_process_title() -> None:
    """`ps` shows a process's command line to every user: mask secret flag values there."""
    masked = hide_secret_arguments(sys.argv)
    if masked is not None:
        setproctitle.setproctitle(" ".join(masked))


if __name__ == "__main__":
    sys.exit(main())
