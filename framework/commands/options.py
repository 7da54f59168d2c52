"""Options every command shares, each with its environment variable shown in --help,
and how a command is declared (`Command`, `Group`).

An option backed by an environment variable has an `EnvDefault` as its default:
the variable is read and converted (the option's `type`, `choices`) when the
command line is parsed, never while the parser is built, so one bad value fails
only the command that uses it, with argparse's one-line error naming the
variable, and `--help` always works.

A command module declares its command as a `Command` (name, texts, its own
options, what runs it) or a `Group` of actions, and its `add_parser(subparsers,
common)`, which `framework.cli` calls, registers it: with the shared options of
`common_parser()` and its `run` as the parsed arguments' `run`.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from framework.kernel.client_settings import read_kafka_properties, read_zk_auth
from framework.kernel.config import DEFAULT_APP, ConnectionConfig
from framework.kernel.errors import ConfigError, InvalidSetting
from framework.kernel.transport import KAFKA_CLIENTS
from framework.logging import LOG_FORMATS, LOG_LEVELS
from router.registry import app_stream_count

__all__ = [
    "Command",
    "CommandParser",
    "EnvDefault",
    "Group",
    "Subparsers",
    "common_parser",
    "connection_from_args",
    "require_addresses",
    "require_streams",
]


_LOCAL = '(`eval "$(sessionizer cluster up)"` sets it for a local cluster)'


def require_addresses(args: argparse.Namespace, *, zk: bool = True, bootstrap: bool) -> None:
    """Say which flag or variable is missing, the way a command-line user fixes it."""
    if zk and not args.zk:
        raise ConfigError(f"no ZooKeeper address: pass --zk or set SESSIONIZER_ZK {_LOCAL}")
    if bootstrap and not getattr(args, "bootstrap", None):
        raise ConfigError(
            f"no Kafka bootstrap servers: pass --bootstrap or set SESSIONIZER_BOOTSTRAP {_LOCAL}"
        )


@dataclass(frozen=True)
class EnvDefault:
    """An option's default: `variable` if set (and not empty), else `fallback`.

    Read when the command line is parsed (`CommandParser`), converted with the
    option's `type` and checked against its `choices`; `fallback` is used as is.
    With `required`, an option given neither on the command line nor in the
    environment is an error.
    """

    variable: str
    fallback: Any = None
    required: bool = False

    def __str__(self) -> str:
        return str(self.fallback)  # what `%(default)s` in a help text shows

    def resolve(self, action: argparse.Action) -> Any:
        """The option's value; raises `InvalidSetting` saying what is wrong with the variable."""
        raw = os.environ.get(self.variable)
        if not raw:
            return self.fallback
        try:
            value = action.type(raw) if callable(action.type) else raw
        except argparse.ArgumentTypeError as exc:
            raise InvalidSetting(str(exc)) from exc
        except (TypeError, ValueError) as exc:
            raise InvalidSetting(_NOT_A.get(action.type, f"invalid value ({exc})")) from exc
        if action.choices is not None and value not in action.choices:
            raise InvalidSetting(f"not one of {', '.join(map(str, action.choices))}")
        return value


_NOT_A: dict[Any, str] = {float: "not a number", int: "not an integer"}


class CommandParser(argparse.ArgumentParser):
    """An `ArgumentParser` that resolves `EnvDefault`s after parsing (its subparsers too)."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Parse, then read each option left at its `EnvDefault` from the environment."""
        parsed, rest = super().parse_known_args(args, namespace)
        for action in self._actions:
            default = getattr(parsed, action.dest, None)
            if not isinstance(default, EnvDefault):
                continue
            raw = os.environ.get(default.variable)
            if default.required and not raw:
                flags = "/".join(action.option_strings)
                self.error(f"the following arguments are required: {flags} "
                           f"(or set {default.variable})")  # fmt: skip
            try:
                setattr(parsed, action.dest, default.resolve(action))
            except InvalidSetting as exc:
                self.error(f"{default.variable}={raw!r}: {exc}")
        return parsed, rest


Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""Where a command is added: what `add_parser(subparsers, common)` is given."""


def _no_options(parser: argparse.ArgumentParser) -> None:
    """A command with only the shared options."""


@dataclass(frozen=True)
class Command:
    """One command (or one action of a `Group`): its name and texts, its own options
    (`options(parser)` adds them) and what runs it (`run(args)`, the exit code)."""

    name: str
    run: Callable[[argparse.Namespace], int]
    help: str
    description: str | None = None
    options: Callable[[argparse.ArgumentParser], None] = _no_options
    quiet_clients: bool = False
    """A one-shot read of the cluster: its error is one line, so the clients' own lines are
    left out unless --log-level debug (`framework.commands.client_lines`)."""

    def register(self, subparsers: Subparsers, common: argparse.ArgumentParser) -> None:
        """Add the command, with the shared options of `common` (`common_parser()`)."""
        parser = subparsers.add_parser(
            self.name, parents=[common], help=self.help, description=self.description
        )
        self.options(parser)
        parser.set_defaults(run=self.run, quiet_clients=self.quiet_clients)


@dataclass(frozen=True)
class Group:
    """A command that is one of its actions (`cluster up`, `cluster down`): `args.action`."""

    name: str
    help: str
    actions: tuple[Command, ...]

    def register(self, subparsers: Subparsers, common: argparse.ArgumentParser) -> None:
        """Add the command and each of its actions."""
        parser = subparsers.add_parser(self.name, help=self.help)
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        for action in self.actions:
            action.register(actions, common)
            # Errors name the action as argparse's own do: `sessionizer streams reset: error:`.
            actions.choices[action.name].set_defaults(command_line=f"{self.name} {action.name}")


def common_parser() -> argparse.ArgumentParser:
    """A parent parser with --zk, --bootstrap, --app, the Kafka client and the log options."""
    parser = argparse.ArgumentParser(add_help=False)
    group = parser.add_argument_group("cluster")
    group.add_argument(
        "--zk",
        default=EnvDefault("SESSIONIZER_ZK"),
        help="ZooKeeper connection string [env: SESSIONIZER_ZK]",
    )
    group.add_argument(
        "--bootstrap",
        default=EnvDefault("SESSIONIZER_BOOTSTRAP"),
        help="Kafka bootstrap servers [env: SESSIONIZER_BOOTSTRAP]",
    )
    group.add_argument(
        "--app",
        default=EnvDefault("SESSIONIZER_APP", DEFAULT_APP),
        help=f"app name: topic prefix and ZooKeeper subtree [env: SESSIONIZER_APP] "
        f"(default: {DEFAULT_APP})",
    )
    group.add_argument(
        "--kafka-client",
        choices=KAFKA_CLIENTS,
        default=EnvDefault("SESSIONIZER_KAFKA_CLIENT", "auto"),
        help="Kafka client library: confluent-kafka (librdkafka) or kafka-python; auto takes "
        "confluent-kafka when it is installed [env: SESSIONIZER_KAFKA_CLIENT] (default: auto)",
    )
    group.add_argument(
        "--kafka-config",
        metavar="FILE",
        default=EnvDefault("SESSIONIZER_KAFKA_CONFIG"),
        help="Kafka client properties file (security.protocol, sasl.*, ssl.*, ...) "
        "[env: SESSIONIZER_KAFKA_CONFIG]",
    )
    group.add_argument(
        "--zk-auth",
        metavar="SCHEME:CREDENTIALS",
        default=EnvDefault("SESSIONIZER_ZK_AUTH"),
        help="ZooKeeper authentication, e.g. digest:user:password, or @FILE that holds it "
        "(a mounted secret) [env: SESSIONIZER_ZK_AUTH]",
    )
    logs = parser.add_argument_group("logging")
    logs.add_argument(
        "--log-level",
        default=EnvDefault("SESSIONIZER_LOG_LEVEL", "info"),
        choices=LOG_LEVELS,
        help="log level [env: SESSIONIZER_LOG_LEVEL] (default: info)",
    )
    logs.add_argument(
        "--log-format",
        default=EnvDefault("SESSIONIZER_LOG_FORMAT"),
        choices=LOG_FORMATS,
        help="log lines on stderr as JSON or for people [env: SESSIONIZER_LOG_FORMAT] "
        "(default: console on a terminal, else json)",
    )
    return parser


def connection_from_args(args: argparse.Namespace) -> ConnectionConfig:
    """Build the validated connection config from parsed arguments."""
    require_addresses(args, bootstrap=True)
    kafka_config = getattr(args, "kafka_config", None)
    return ConnectionConfig(
        zk=args.zk or "",
        bootstrap=args.bootstrap or "",
        app=args.app,
        kafka_client=getattr(args, "kafka_client", None) or "auto",
        kafka_config=read_kafka_properties(kafka_config) if kafka_config else {},
        zk_auth=read_zk_auth(getattr(args, "zk_auth", None)),
    )


def require_streams(connection: ConnectionConfig) -> int:
    """The app's stream count as `streams create` recorded it in ZooKeeper.

    Raises `StreamsNotCreated` (one line, exit 2) for an app whose streams were never
    created: the same check `produce` makes, so no command waits for ever on topics
    that will not appear.
    """
    return app_stream_count(connection)
