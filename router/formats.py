"""Turn one input line into a `ParsedFragment`, or reject it with a reason code.

Formats (details and reason codes in docs/routing.md):

- ``apache``: combined log format; key ``"<client ip>|<user agent>"``.
- ``sshd``: syslog auth log, ``sshd[pid]`` lines only; key ``"<host>:<pid>"``.
- ``jsonl``: one JSON object with ``"key"`` and ``"ts"``; key = ``"key"``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final, Literal, get_args

from router.errors import MalformedLine
from router.formats_apache import parse_apache, referrer_site
from router.formats_jsonl import parse_jsonl
from router.formats_sshd import DEFAULT_SYSLOG_YEAR, parse_sshd
from router.fragment import ParsedFragment

__all__ = [
    "DEFAULT_SYSLOG_YEAR",
    "FORMATS",
    "Format",
    "ParsedFragment",
    "parse_file",
    "parse_line",
    "referrer_site",
]

Format = Literal["apache", "sshd", "jsonl"]
FORMATS: Final[tuple[Format, ...]] = get_args(Format)


def parse_line(fmt: Format, line: str, *, year: int = DEFAULT_SYSLOG_YEAR) -> ParsedFragment:
    """Parse one line of `fmt`; `year` (default DEFAULT_SYSLOG_YEAR) dates syslog lines only."""
    # A trailing newline is part of reading a file, not of the record; a BOM only
    # ever starts a file's first line.
    text = line.removeprefix("\ufeff").rstrip("\r\n")
    if not text.strip():
        raise MalformedLine("empty", "blank line")
    if fmt == "apache":
        return parse_apache(text)
    if fmt == "sshd":
        return parse_sshd(text, year=year)
    if fmt == "jsonl":
        return parse_jsonl(text)
    # A caller bug or a bad --format value, not a bad line: do not count it as a rejection.
    raise ValueError(f"unknown input format {fmt!r}; expected one of {', '.join(FORMATS)}")


def parse_file(path: Path, fmt: Format, *, year: int = DEFAULT_SYSLOG_YEAR) -> list[ParsedFragment]:
    """Every fragment a log file holds, in file order; malformed lines are skipped.

    For counting rejections by reason, feed the lines to `router.ingest` instead.
    """
    fragments = []
    # newline="": parse_line strips the line ending itself, as `produce` reads files.
    with path.open(encoding="utf-8", errors="replace", newline="") as lines:
        for line in lines:
            try:
                fragments.append(parse_line(fmt, line, year=year))
            except MalformedLine:
                continue
    return fragments
