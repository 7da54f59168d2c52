"""Turn one input line into a `ParsedFragment`, or reject it with a reason code.

A format is any `Format` (a `name` and `parse(line)`); `load_format` finds one
by name or `MODULE:NAME` (`router.format_registry`).  Built-in formats (details
and reason codes in docs/routing.md):

- ``apache``: combined log format; key ``"<client ip>|<user agent>"``.
- ``sshd``: syslog auth log, ``sshd[pid]`` lines only; key ``"<host>:<pid>"``.
- ``jsonl``: one JSON object with ``"key"`` and ``"ts"``; key = ``"key"``.

What every format shares is done here, once: the line ending and a leading
byte-order mark are removed, and a blank line is rejected as ``empty``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from router.errors import FormatError, MalformedLine
from router.format_registry import Format, FormatSpec, LineParser, load_format
from router.formats_jsonl import JsonlFormat, TimeUnit
from router.formats_sshd import SshdFormat, log_year
from router.fragment import ParsedFragment
from router.line_input import read_lines

__all__ = [
    "line_parser",
    "parse_file",
    "parse_line",
    "syslog_year",
    "with_time_unit",
    "with_year",
]


def with_year(fmt: Format, year: int | None) -> Format:
    """`fmt` dating classic syslog lines in `year`; only the built-in `sshd` has a year.

    None keeps `fmt` as it is (the built-in `sshd` uses DEFAULT_SYSLOG_YEAR); other
    formats ignore the year.
    """
    if year is None or not isinstance(fmt, SshdFormat):
        return fmt
    return dataclasses.replace(fmt, year=year)


def with_time_unit(fmt: Format, unit: TimeUnit | None) -> Format:
    """`fmt` reading numeric times in `unit`; only the built-in `jsonl` has a unit.

    None keeps `fmt` as it is; for any other format a unit is a `FormatError` (a
    `--time-unit` that would silently do nothing).
    """
    if unit is None:
        return fmt
    if not isinstance(fmt, JsonlFormat):
        raise FormatError(
            f"--time-unit applies to the built-in jsonl format only, not {fmt.name!r} "
            "(a format of your own reads its times itself)"
        )
    return dataclasses.replace(fmt, time_unit=unit)


def line_parser(fmt: FormatSpec, *, year: int | None = None) -> LineParser:
    """A function parsing lines of `fmt` (loaded once, so errors in `fmt` come now).

    Give it one log's lines in order: the built-in `sshd` dates its first classic
    syslog line in `year` and moves to the next year where the months step back
    (Dec -> Jan; `router.formats_sshd.SyslogYears`).
    """
    loaded = with_year(load_format(fmt), year)
    parse = loaded.reader() if isinstance(loaded, SshdFormat) else loaded.parse

    def parse_one(line: str) -> ParsedFragment:
        # A trailing newline is part of reading a file, not of the record; a BOM only
        # ever starts a file's first line.
        text = line.removeprefix("\ufeff").rstrip("\r\n")
        if not text.strip():
            raise MalformedLine("empty", "blank line")
        fragment = parse(text)
        if not isinstance(fragment, ParsedFragment):
            # A bug in the format, not a bad line: do not count it as a rejection.
            raise FormatError(
                f"input format {loaded.name!r} returned {type(fragment).__name__}, "
                "not a ParsedFragment"
            )
        return fragment

    return parse_one


def syslog_year(file: str, fmt: Format) -> int | None:
    """The year `produce` dates a file's classic syslog lines in when no `--year` is given.

    For the built-in `sshd` format and a file (not `-`, standard input): the year of
    its first line, from the file's modification time (`router.formats_sshd.log_year`);
    None otherwise (the format's own year: DEFAULT_SYSLOG_YEAR).
    """
    if not isinstance(fmt, SshdFormat) or file == "-" or not Path(file).is_file():
        return None
    return log_year(Path(file))


def parse_line(fmt: FormatSpec, line: str, *, year: int | None = None) -> ParsedFragment:
    """Parse one line of `fmt` (a `Format`, a built-in name or MODULE:NAME).

    `year` dates classic syslog lines of the built-in `sshd` format (None: its
    own year, DEFAULT_SYSLOG_YEAR for `"sshd"`); other formats ignore it.  An
    unknown format raises `FormatError`, never `MalformedLine`: it is a caller's
    mistake, not a bad line.  To parse many lines, make a `line_parser` once.
    """
    return line_parser(fmt, year=year)(line)


def parse_file(path: Path, fmt: FormatSpec, *, year: int | None = None) -> list[ParsedFragment]:
    """Every fragment a log file holds, in file order; malformed lines are skipped.

    For counting rejections by reason, feed the lines to `router.ingest` instead.
    """
    parse = line_parser(fmt, year=year)
    fragments = []
    with path.open("rb") as source:
        for line in read_lines(source):  # the lines `produce` reads
            try:
                fragments.append(parse(line))
            except MalformedLine:
                continue
    return fragments
