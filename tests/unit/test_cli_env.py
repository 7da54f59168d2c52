"""Every env-backed option is read when its command is parsed, with a one-line error.

The options are found by walking the real parser, so an option added later is
covered without editing this file.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import framework.commands.options as options
from framework.cli import build_parser


class _Absent:
    """Stands for `EnvDefault` where it does not exist: the walk then finds nothing, and fails."""


EnvDefault: type = getattr(options, "EnvDefault", _Absent)

# A subset the walk must find: proof that it walked the commands at all.
KNOWN = {
    "SESSIONIZER_ZK", "SESSIONIZER_BOOTSTRAP", "SESSIONIZER_APP", "SESSIONIZER_KAFKA_CLIENT",
    "SESSIONIZER_KAFKA_CONFIG", "SESSIONIZER_ZK_AUTH", "SESSIONIZER_LOG_LEVEL",
    "SESSIONIZER_LOG_FORMAT", "SESSIONIZER_PROCESSOR", "SESSIONIZER_SESSION_TIMEOUT",
    "SESSIONIZER_DELIVERY_TIMEOUT", "SESSIONIZER_METRICS_PORT", "SESSIONIZER_HANDOVER",
    "SESSIONIZER_BALANCE", "SESSIONIZER_BALANCE_TOLERANCE", "SESSIONIZER_BALANCE_INTERVAL",
    "SESSIONIZER_CLUSTER_DIR", "SESSIONIZER_PRODUCER_ID", "SESSIONIZER_SPARK_MASTER",
    "SESSIONIZER_AGGREGATE_OUT", "SESSIONIZER_AGGREGATE_WATERMARK",
}  # fmt: skip


def _leaves(
    parser: argparse.ArgumentParser, path: list[str]
) -> Iterator[tuple[list[str], argparse.ArgumentParser]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for sub in subs:
        for name, child in sub.choices.items():
            yield from _leaves(child, [*path, name])


def _minimal_argv(parser: argparse.ArgumentParser, testing: str) -> list[str]:
    """Values for the arguments the command requires (a required env option given as a flag
    unless it is the one under test)."""
    argv: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        env = action.default if isinstance(action.default, EnvDefault) else None
        needed = action.required or (env is not None and env.required)
        if env is not None and env.variable == testing:
            continue
        value = "1" if action.type in (int, float) else "x:y"
        if action.choices:
            value = str(next(iter(action.choices)))
        if not action.option_strings and action.nargs not in ("?", "*"):
            argv.append(value)
        elif needed:
            argv += [action.option_strings[0], value]
    return argv


def _cases() -> list[tuple[list[str], str, argparse.Action]]:
    cases = []
    for path, parser in _leaves(build_parser(), []):
        for action in parser._actions:
            if isinstance(action.default, EnvDefault):
                cases.append((path, action.default.variable, action))
    return cases


CASES = _cases()


@pytest.fixture(autouse=True)
def _no_sessionizer_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("SESSIONIZER_"):
            monkeypatch.delenv(name)


def test_the_walk_finds_every_known_variable() -> None:
    assert {variable for _, variable, _ in CASES} >= KNOWN


def _parse(path: list[str], variable: str) -> argparse.Namespace:
    parser = dict((tuple(p), leaf) for p, leaf in _leaves(build_parser(), []))[tuple(path)]
    return build_parser().parse_args([*path, *_minimal_argv(parser, variable)])


@pytest.mark.parametrize(
    ("path", "variable", "action"),
    CASES,
    ids=[f"{' '.join(p)}:{v}" for p, v, _ in CASES],
)
def test_a_bad_value_is_one_line_naming_the_variable_and_help_still_works(
    path: list[str],
    variable: str,
    action: argparse.Action,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    checked = action.type in (int, float) or action.choices is not None
    monkeypatch.setenv(variable, "abc" if checked else "some-value")
    with pytest.raises(SystemExit) as help_exit:
        build_parser().parse_args([*path, "--help"])
    assert help_exit.value.code == 0
    capsys.readouterr()
    if not checked:  # any string is a valid value: it arrives, converted by the type
        args = _parse(path, variable)
        expected = action.type("some-value") if callable(action.type) else "some-value"
        assert getattr(args, action.dest) == expected
        return
    with pytest.raises(SystemExit) as bad:
        _parse(path, variable)
    assert bad.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    prog = " ".join(["sessionizer", *path])
    assert error.startswith(f"{prog}: error: {variable}='abc': "), error
    assert "Traceback" not in error


def test_the_issue_example_and_conversion_at_parse_time(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SESSIONIZER_BALANCE_TOLERANCE", "abc")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["status", "--help"])
    capsys.readouterr()
    with pytest.raises(SystemExit) as bad:
        build_parser().parse_args(["node", "--processor", "m:C"])
    assert bad.value.code == 2
    assert capsys.readouterr().err.endswith(
        "sessionizer node: error: SESSIONIZER_BALANCE_TOLERANCE='abc': not a number\n"
    )
    # A flag wins over the variable, which is then not even read.
    args = build_parser().parse_args(["node", "--processor", "m:C", "--balance-tolerance", "0.3"])
    assert args.balance_tolerance == 0.3
    monkeypatch.setenv("SESSIONIZER_BALANCE_TOLERANCE", "0.5")
    monkeypatch.setenv("SESSIONIZER_METRICS_PORT", "9100")
    monkeypatch.setenv("SESSIONIZER_CLUSTER_DIR", "/tmp/c")
    args = build_parser().parse_args(["node", "--processor", "m:C"])
    assert (args.balance_tolerance, args.metrics_port) == (0.5, 9100)
    assert build_parser().parse_args(["cluster", "down"]).dir == Path("/tmp/c")


def test_defaults_without_the_environment() -> None:
    args = build_parser().parse_args(["node", "--processor", "m:C"])
    assert (args.session_timeout, args.balance_tolerance, args.metrics_port) == (10.0, 0.2, None)
    assert (args.app, args.kafka_client, args.log_level, args.log_format) == (
        "sessionizer", "auto", "info", None,
    )  # fmt: skip
    assert build_parser().parse_args(["cluster", "down"]).dir == Path(".local-cluster")


def test_a_required_option_may_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as missing:
        build_parser().parse_args(["node"])
    assert missing.value.code == 2
    assert capsys.readouterr().err.endswith(
        "sessionizer node: error: the following arguments are required: --processor "
        "(or set SESSIONIZER_PROCESSOR)\n"
    )
    monkeypatch.setenv("SESSIONIZER_PROCESSOR", "m:C")
    assert build_parser().parse_args(["node"]).processor == "m:C"
