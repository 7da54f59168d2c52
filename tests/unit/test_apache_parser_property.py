"""The apache parser's fast paths give what the plain definitions give, on random input.

Its quoted fields are matched by an unrolled pattern, its times come from a memo of each
day's midnight, and referrers' sites from a memo too (benchmarks/HOT_PATH.md, round 20):
each is held here to the simple form it replaces, the alternation per character, one
`datetime` per line and one `urlsplit` per line.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from urllib.parse import urlsplit

from hypothesis import example, given, settings
from hypothesis import strategies as st

from router.errors import MalformedLine
from router.formats_apache import _LINE_RE, parse_apache, referrer_site

_PLAIN_QUOTED = r'"((?:[^"\\]|\\.)*)"'
_PLAIN_LINE = re.compile(
    r"(?P<ip>\S+) \S+ \S+ \[(?P<time>[^\]]*)\] "
    rf"{_PLAIN_QUOTED} (?P<status>[0-9]{{3}}) (?P<bytes>[0-9]+|-) {_PLAIN_QUOTED} {_PLAIN_QUOTED}"
)
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")

# Quotes, escapes, a newline and a character outside ASCII: what decides a quoted field.
_FIELD = st.text(alphabet=["a", " ", '"', "\\", "\n", "é", "/"], max_size=12)


@settings(max_examples=400, deadline=None)
@given(request=_FIELD, referrer=_FIELD, agent=_FIELD, tail=st.sampled_from(["", " ", '"']))
def test_a_line_matches_as_the_alternation_per_character_matches_it(
    request: str, referrer: str, agent: str, tail: str
) -> None:
    line = (
        f'10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] "{request}" 200 12 "{referrer}" "{agent}"'
        + tail
    )
    fast, plain = _LINE_RE.fullmatch(line), _PLAIN_LINE.fullmatch(line)
    assert (fast and fast.groups()) == (plain and plain.groups())


def _plain_time(day: int, month: int, year: int, clock: tuple[int, int, int], zone: str) -> int:
    """Epoch ms of the time by `datetime` alone (ValueError for one that does not exist)."""
    offset = timedelta(hours=int(zone[1:3]), minutes=int(zone[3:]))
    moment = datetime(
        year, month, day, *clock, tzinfo=timezone(-offset if zone[0] == "-" else offset)
    )
    millis = (moment - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
    if millis < 0:
        raise ValueError("before 1970")
    return millis


_CLOCK = st.tuples(st.integers(0, 25), st.integers(0, 61), st.integers(0, 61))


@settings(max_examples=400, deadline=None)
@given(
    day=st.integers(1, 31),
    month=st.integers(1, 12),
    year=st.sampled_from([1969, 1970, 2000, 2024, 2100]),
    zone=st.builds(
        lambda sign, hours, minutes: f"{sign}{hours:02d}{minutes:02d}",
        st.sampled_from("+-"),
        st.integers(0, 25),
        st.sampled_from([0, 30, 45, 59, 60, 99]),
    ),
    clocks=st.lists(_CLOCK, min_size=1, max_size=4),
)
# A day that begins before 1970 and ends after it: its first time fills the memo.
@example(day=1, month=1, year=1970, zone="+0600", clocks=[(10, 0, 0), (5, 0, 0)])
def test_times_of_one_day_are_those_datetime_gives_or_are_refused_alike(
    day: int, month: int, year: int, zone: str, clocks: list[tuple[int, int, int]]
) -> None:
    # Several times of the same day and zone: the first may fill the memo the others use.
    for clock in clocks:
        hh, mm, ss = clock
        stamp = f"{day:02d}/{_MONTHS[month - 1]}/{year}:{hh:02d}:{mm:02d}:{ss:02d} {zone}"
        line = f'10.0.0.1 - - [{stamp}] "GET / HTTP/1.1" 200 12 "-" "agent"'
        try:
            expected: int | None = _plain_time(day, month, year, clock, zone)
        except ValueError:
            expected = None
        try:
            got: int | None = parse_apache(line).timestamp_ms
        except MalformedLine as exc:
            assert exc.reason == "bad-timestamp", exc
            got = None
        assert got == expected, stamp


def _plain_site(referrer: str) -> str:
    try:
        return urlsplit(referrer).hostname or "-"
    except ValueError:  # a malformed URL names no site
        return "-"


@settings(max_examples=400, deadline=None)
@given(
    referrers=st.lists(
        st.builds(
            "".join,
            st.lists(
                st.sampled_from(
                    [
                        "http://",
                        "https://",
                        "-",
                        "Ex.com",
                        ":80",
                        "/p",
                        "[",
                        "]",
                        "::1",
                        "@",
                        "?q",
                        "é",
                        " ",
                    ]
                ),
                max_size=5,
            ),
        ),
        max_size=6,
    )
)
def test_a_referrers_site_is_the_one_urlsplit_gives_also_the_second_time(
    referrers: list[str],
) -> None:
    for referrer in referrers * 2:  # the second time from the memo
        assert referrer_site(referrer) == _plain_site(referrer), referrer
