"""The `sshd` format on the real auth.log: the year of syslog lines, and who the user is."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from framework.cli import main
from framework.testing.cli import DATA
from framework.testing.producer import RecordingTransport, record_produce_command, sent_times
from router import load_format
from router.formats import line_parser, parse_file, parse_line, syslog_year
from router.formats_sshd import SshdFormat, SyslogYears, log_year

AUTH_LOG = DATA / "auth.log"  # Mar 27 13:06:56 .. Apr 20 14:14:29, no year


def ms(*when: int) -> int:
    return int(datetime(*when, tzinfo=UTC).timestamp() * 1000)  # type: ignore[misc]


def copy_modified(tmp_path: Path, source: Path, modified: datetime) -> Path:
    """A copy of `source` whose modification time is `modified`."""
    copy = tmp_path / source.name
    shutil.copyfile(source, copy)
    os.utime(copy, (modified.timestamp(), modified.timestamp()))
    return copy


def span(fragments: list[Any]) -> tuple[int, int]:
    times = [f.timestamp_ms for f in fragments]
    return min(times), max(times)


# -- the year ---------------------------------------------------------------------------


def test_the_year_given_dates_the_real_log() -> None:
    assert span(parse_file(AUTH_LOG, "sshd", year=2017)) == (
        ms(2017, 3, 27, 13, 6, 56),
        ms(2017, 4, 20, 14, 14, 29),
    )


@pytest.mark.parametrize(
    ("modified", "year"),
    [
        (datetime(2019, 6, 1, tzinfo=UTC), 2019),  # after the last line: that year
        (datetime(2019, 4, 21, tzinfo=UTC), 2019),  # the day after the last line
        (datetime(2019, 2, 1, tzinfo=UTC), 2018),  # a log of March kept until February
    ],
)
def test_the_files_modification_time_dates_the_real_log(
    tmp_path: Path, modified: datetime, year: int
) -> None:
    log = copy_modified(tmp_path, AUTH_LOG, modified)
    assert log_year(log) == year
    assert syslog_year(str(log), SshdFormat()) == year
    assert span(parse_file(log, "sshd", year=year))[0] == ms(year, 3, 27, 13, 6, 56)


def test_a_log_that_crosses_new_year_moves_to_the_next(tmp_path: Path) -> None:
    # The real log moved to December and January: its months step back once.
    text = AUTH_LOG.read_text(encoding="utf-8", errors="replace")
    crossing = "\n".join(
        "Dec" + line[3:] if line.startswith("Mar") else "Jan" + line[3:]
        for line in text.split("\n")
    )
    log = copy_modified(tmp_path, AUTH_LOG, datetime(2021, 2, 1, tzinfo=UTC))
    log.write_text(crossing, encoding="utf-8")
    os.utime(log, (datetime(2021, 2, 1, tzinfo=UTC).timestamp(),) * 2)
    assert log_year(log) == 2020  # the last line, Jan 20, is in 2021
    fragments = parse_file(log, "sshd", year=2020)
    assert span(fragments) == (ms(2020, 12, 27, 13, 6, 56), ms(2021, 1, 20, 14, 14, 29))
    assert all(a.timestamp_ms <= b.timestamp_ms + 60_000 for a, b in pairwise(fragments))
    # One line alone has no predecessor: it is in the year given.
    january = next(line for line in reversed(crossing.split("\n")) if " sshd[" in line)
    assert parse_line("sshd", january, year=2020).timestamp_ms < ms(2021, 1, 1)


def test_only_a_step_back_of_over_half_a_year_is_a_new_year() -> None:
    years = SyslogYears(2020)
    assert [years(m) for m in (5, 4, 5, 11, 12, 1, 1, 6, 12, 2)] == [
        2020, 2020, 2020, 2020, 2020, 2021, 2021, 2021, 2021, 2022,
    ]  # fmt: skip
    parse = line_parser("sshd", year=2020)
    late = parse("May  1 00:00:01 h sshd[1]: Connection closed by 1.2.3.4 port 5")
    early = parse("Apr 30 23:59:59 h sshd[2]: Connection closed by 1.2.3.4 port 5")
    assert (late.timestamp_ms, early.timestamp_ms) == (
        ms(2020, 5, 1, 0, 0, 1),
        ms(2020, 4, 30, 23, 59, 59),
    )


def test_standard_input_and_other_formats_keep_the_formats_year() -> None:
    assert syslog_year("-", SshdFormat()) is None
    assert syslog_year(str(AUTH_LOG), SshdFormat()) is not None
    assert syslog_year(str(DATA / "apache_logs"), load_format("apache")) is None


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordingTransport]:
    """`produce` with its producer on a transport that keeps what it is given."""
    monkeypatch.delenv("SESSIONIZER_LOG_YEAR", raising=False)
    yield record_produce_command(monkeypatch)


def produce(*argv: str) -> int:
    return main(
        ["produce", *argv, "--format", "sshd", "--zk", "z:1", "--bootstrap", "b:1", "--json"]
    )


def test_produce_takes_the_year_from_the_option_the_variable_or_the_file(
    sent: RecordingTransport, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = copy_modified(tmp_path, AUTH_LOG, datetime(2019, 2, 1, tzinfo=UTC))
    assert produce(str(log), "--year", "2017") == 0
    assert min(sent_times(sent)) == ms(2017, 3, 27, 13, 6, 56) and len(sent_times(sent)) == 4_095
    sent.records.clear()
    monkeypatch.setenv("SESSIONIZER_LOG_YEAR", "2016")
    assert produce(str(log)) == 0
    assert min(sent_times(sent)) == ms(2016, 3, 27, 13, 6, 56)
    sent.records.clear()
    monkeypatch.delenv("SESSIONIZER_LOG_YEAR")
    assert produce(str(log)) == 0  # modified in February 2019: the log is of 2018
    assert span_of(sent_times(sent)) == (ms(2018, 3, 27, 13, 6, 56), ms(2018, 4, 20, 14, 14, 29))


def span_of(times: list[int]) -> tuple[int, int]:
    return min(times), max(times)


# -- the user ---------------------------------------------------------------------------


def test_no_user_is_made_of_phrases_that_name_none() -> None:
    fragments = parse_file(AUTH_LOG, "sshd", year=2017)
    users = {f.fields["user"] for f in fragments}
    assert not {"[preauth]", "unknown"} & users
    by_message = {f.fields["message"]: f.fields["user"] for f in fragments}
    disconnect = (
        "Received disconnect from 89.97.55.33 port 44947:11: disconnected by user [preauth]"
    )
    assert by_message[disconnect] is None
    assert by_message["pam_unix(sshd:auth): check pass; user unknown"] is None
    # A user really named "user" is still one.
    assert by_message["input_userauth_request: invalid user user [preauth]"] == "user"
    assert by_message["Invalid user user from 91.197.232.109"] == "user"
