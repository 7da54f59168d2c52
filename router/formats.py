"""Turn one input line into a `ParsedFragment`, or reject it with a reason code.

Formats (details and reason codes in docs/routing.md):

- ``apache``: combined log format; key ``"<client ip>|<user agent>"``.
- ``sshd``: syslog auth log, ``sshd[pid]`` lines only; key ``"<host>:<pid>"``.
- ``jsonl``: one JSON object with ``"key"`` and ``"ts"``; key = ``"key"``.
"""

from __future__ import annotations

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
