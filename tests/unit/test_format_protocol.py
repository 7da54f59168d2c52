"""The `Format` protocol: built-ins by name, MODULE:NAME loading, its errors, the registry check."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import logging
import textwrap
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import pytest
import structlog
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from framework.cli import main
from framework.kernel.errors import ConfigError
from router import DEFAULT_SYSLOG_YEAR, FORMATS, Format, ParsedFragment, load_format
from router.errors import FormatError, MalformedLine, StreamCountMismatch, StreamsNotCreated
from router.format_registry import BUILTIN_FORMATS, FunctionFormat
from router.formats import line_parser, parse_file, parse_line, with_year
from router.formats_sshd import SshdFormat
from router.registry import streams_for

SSHD = "Mar 27 13:08:09 ip-10-77-20-248 sshd[1361]: Accepted publickey for ubuntu from 1.2.3.4"

# A module as a user would write it: a Format class, an instance, a plain function, and
# the things that are not formats.
MODULE = """
from router import MalformedLine, ParsedFragment


def _row(line):
    user, ts, *rest = line.split(",")
    if not ts.isdigit():
        raise MalformedLine("bad-ts", f"{ts!r} is not epoch ms")
    return ParsedFragment(user, int(ts), {"rest": rest})


class Csv:
    name = "csv"

    def parse(self, line):
        return _row(line)


class NamedInInit:
    def __init__(self, separator=","):
        self.name = "named-in-init"
        self.separator = separator

    def parse(self, line):
        return _row(line.replace(self.separator, ","))


CSV = Csv()
parse_row = _row
NOT_A_FORMAT = 42
NONE_VALUE = None


class NoParse:
    name = "no-parse"


class NeedsArgs:
    name = "needs-args"

    def __init__(self, columns):
        self.columns = columns

    def parse(self, line):
        return _row(line)


class BadName:
    name = ""

    def parse(self, line):
        return _row(line)


class ReturnsTuple:
    name = "returns-tuple"

    def parse(self, line):
        return ("k", 1, {})
"""

_counter = itertools.count()


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The name of a fresh copy of MODULE, importable through sys.path."""
    name = f"user_formats_{next(_counter)}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


# -- built-ins --------------------------------------------------------------------------


def test_builtins_are_formats_registered_by_name() -> None:
    assert FORMATS == tuple(BUILTIN_FORMATS) == ("apache", "sshd", "jsonl")
    for name in FORMATS:
        fmt = load_format(name)
        assert fmt is BUILTIN_FORMATS[name]
        assert isinstance(fmt, Format) and fmt.name == name


def test_a_format_object_is_taken_as_it_is() -> None:
    fmt = SshdFormat(2024)
    assert load_format(fmt) is fmt
    assert parse_line(fmt, SSHD).timestamp_ms == parse_line("sshd", SSHD, year=2024).timestamp_ms


def _ms(year: int) -> int:
    """SSHD's time (Mar 27 13:08:09 UTC) in `year`, as epoch ms."""
    return int(datetime(year, 3, 27, 13, 8, 9, tzinfo=UTC).timestamp()) * 1000


def test_sshd_year_default_and_override() -> None:
    assert load_format("sshd") == SshdFormat(DEFAULT_SYSLOG_YEAR)
    default = parse_line("sshd", SSHD).timestamp_ms
    assert default == parse_line(SshdFormat(), SSHD).timestamp_ms == _ms(DEFAULT_SYSLOG_YEAR)
    assert parse_line("sshd", SSHD, year=2023).timestamp_ms == _ms(2023)
    assert with_year(SshdFormat(2024), None) == SshdFormat(2024)  # None keeps its own year
    apache = BUILTIN_FORMATS["apache"]
    assert with_year(apache, 2023) is apache  # only syslog lines have no year


def test_a_builtin_class_loads_through_module_name() -> None:
    assert load_format("router.formats_sshd:SshdFormat") == SshdFormat()


def _first_field(line: str) -> ParsedFragment:
    return ParsedFragment(line.split(",")[0], 0, {})


def test_a_class_or_function_given_directly_is_taken_as_module_name_would() -> None:
    assert load_format(SshdFormat) == SshdFormat()  # type: ignore[arg-type]
    wrapped = load_format(_first_field)  # type: ignore[arg-type]
    assert wrapped == FunctionFormat(f"{__name__}:_first_field", _first_field)
    assert parse_line(wrapped, "ann,x").key == "ann"


# -- MODULE:NAME ------------------------------------------------------------------------


def test_module_name_loads_an_instance_a_class_and_a_function(module: str) -> None:
    instance = load_format(f"{module}:CSV")
    assert instance.name == "csv"
    created = load_format(f"{module}:Csv")
    assert created.name == "csv" and created is not instance
    assert load_format(f"{module}:NamedInInit").name == "named-in-init"
    function = load_format(f"{module}:parse_row")
    assert isinstance(function, FunctionFormat) and function.name == f"{module}:parse_row"
    for fmt in (instance, created, function):
        assert parse_line(fmt, "ann,1000,/a\r\n") == ParsedFragment("ann", 1000, {"rest": ["/a"]})


def test_a_custom_format_rejects_with_its_own_reason_and_gets_the_shared_checks(
    module: str, tmp_path: Path
) -> None:
    spec = f"{module}:CSV"
    with pytest.raises(MalformedLine) as info:
        parse_line(spec, "ann,yesterday,/a")
    assert (info.value.reason, info.value.detail) == ("bad-ts", "'yesterday' is not epoch ms")
    with pytest.raises(MalformedLine) as blank:
        parse_line(spec, " \r\n")  # never reaches the format
    assert blank.value.reason == "empty"
    assert parse_line(spec, "\ufeffann,5").key == "ann"  # the BOM is gone
    path = tmp_path / "rows.csv"
    path.write_text("ann,1\nbob,x\n\nbob,2\n")
    assert [(f.key, f.timestamp_ms) for f in parse_file(path, spec)] == [("ann", 1), ("bob", 2)]


def test_a_format_returning_something_else_is_a_bug_not_a_bad_line(module: str) -> None:
    parse = line_parser(f"{module}:ReturnsTuple")
    with pytest.raises(FormatError, match="'returns-tuple' returned tuple, not a ParsedFragment"):
        parse("a,1")


def test_the_example_format_in_the_docs_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "routing.md").read_text()
    example = docs.split("```python\n# myformats.py\n", 1)[1].split("```", 1)[0]
    name = f"myformats_{next(_counter)}"
    (tmp_path / f"{name}.py").write_text(example)
    monkeypatch.syspath_prepend(str(tmp_path))
    fmt = load_format(f"{name}:CSV")
    assert fmt.name == "csv-visits" and load_format(f"{name}:CsvVisits").name == "csv-visits"
    row = 'ann,2024-01-01T01:00:00+01:00,"/search?q=a,b"\n'
    assert parse_line(fmt, row) == ParsedFragment("ann", 1704067200000, {"page": "/search?q=a,b"})
    for line, reason in [
        ("ann,2024-01-01T00:00:00Z", "bad-columns"),
        (",2024-01-01T00:00:00Z,/", "bad-columns"),
        ("ann,noon,/", "bad-timestamp"),
        ("ann,2024-01-01T00:00:00,/", "bad-timestamp"),
        ("ann,1969-12-31T23:59:59Z,/", "bad-timestamp"),
    ]:
        with pytest.raises(MalformedLine) as info:
            parse_line(fmt, line)
        assert info.value.reason == reason, line


# -- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("csv", "unknown input format 'csv'; use one of apache, sshd, jsonl, or MODULE:NAME"),
        ("Apache", "unknown input format 'Apache'"),
        ("mymodule:", "'mymodule:' is not MODULE:NAME"),
        (":CSV", "':CSV' is not MODULE:NAME"),
        ("no_such_module_xyz:CSV", "cannot import the module of input format "
         "'no_such_module_xyz:CSV' (No module named 'no_such_module_xyz'); is the directory "
         "that holds it on PYTHONPATH?"),
    ],
)  # fmt: skip
def test_errors_without_a_module(spec: str, message: str) -> None:
    with pytest.raises(FormatError) as info:
        load_format(spec)
    assert message in str(info.value)
    assert isinstance(info.value, ConfigError)  # the CLI exits 2 with the message


@pytest.mark.parametrize(
    ("attribute", "message"),
    [
        ("Missing", "module '{m}' ({path}) has no attribute 'Missing'"),
        ("NOT_A_FORMAT", "{m}:NOT_A_FORMAT is an int, not a format: give a Format"),
        ("NONE_VALUE", "{m}:NONE_VALUE is a NoneType, not a format"),
        ("NoParse", "{m}:NoParse is a class without a `parse(line)` method"),
        ("NeedsArgs", "format class {m}:NeedsArgs cannot be created without arguments "
         "(missing a required argument: 'columns')"),
        ("BadName", "format {m}:BadName has name ''; `name` must be a non-empty string"),
    ],
)  # fmt: skip
def test_errors_with_a_module(module: str, tmp_path: Path, attribute: str, message: str) -> None:
    with pytest.raises(FormatError) as info:
        load_format(f"{module}:{attribute}")
    path = tmp_path / f"{module}.py"
    assert message.format(m=module, path=path) in str(info.value)


def test_an_object_that_is_not_a_format() -> None:
    with pytest.raises(FormatError, match="is an int, not a format"):
        load_format(42)  # type: ignore[arg-type]


Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli() -> Iterator[Cli]:
    """Run `sessionizer ARGV` in-process; the logging it configures is undone afterwards."""
    saved, handlers = structlog.get_config(), logging.getLogger().handlers[:]

    def run(*argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([*argv, "--zk", "127.0.0.1:1", "--bootstrap", "127.0.0.1:1"])
            except SystemExit as exc:  # --help
                code = int(exc.code or 0)
        return code, out.getvalue(), err.getvalue()

    yield run
    structlog.configure(**saved)
    logging.getLogger().handlers[:] = handlers


def test_cli_help_lists_the_builtins_and_module_name(cli: Cli) -> None:
    for command in ("produce", "demo"):
        code, out, _ = cli(command, "--help")
        assert code == 0 and "apache, sshd, jsonl, or MODULE:NAME" in " ".join(out.split())


def test_cli_bad_format_fails_before_any_server_is_asked(tmp_path: Path, cli: Cli) -> None:
    log = tmp_path / "in.csv"
    log.write_text("a,1\n")
    # No server listens on port 1: reaching the cluster would fail differently.
    code, _, err = cli("produce", str(log), "--format", "nosuchmodule:CSV")
    assert code == 2 and "is the directory that holds it on PYTHONPATH?" in err
    code, _, err = cli("demo", "--log", str(log), "--format", "csv")
    assert code == 2 and "unknown input format 'csv'" in err


# -- the stream registry check -----------------------------------------------------------


class FakeZooKeeper:
    """Answers `get` from a dict of znode data, as `recorded_stream_count` reads it."""

    def __init__(self, nodes: dict[str, bytes]) -> None:
        self.nodes = nodes

    def get(self, path: str) -> tuple[bytes, None]:
        if path not in self.nodes:
            raise NoNodeError(path)
        return self.nodes[path], None


REGISTRY = "/sessionizer/shop/active_streams"
Check = Callable[[int | None], int]


def _registry(nodes: dict[str, bytes]) -> Check:
    client = cast(KazooClient, FakeZooKeeper(nodes))
    return lambda configured: streams_for(client, REGISTRY, "shop", configured)


def test_streams_for_returns_the_recorded_count() -> None:
    check = _registry({REGISTRY: json.dumps({"count": 16, "created": 1}).encode()})
    assert check(None) == 16
    assert check(16) == 16
    with pytest.raises(StreamCountMismatch, match=r"has 16 streams recorded .* configured for 8"):
        check(8)


@pytest.mark.parametrize("nodes", [{}, {REGISTRY: b""}], ids=["no-znode", "no-count"])
def test_streams_for_without_streams_says_what_to_do(nodes: dict[str, bytes]) -> None:
    with pytest.raises(StreamsNotCreated, match="run `sessionizer streams create --count N`"):
        _registry(nodes)(None)
