"""Input formats: counts on the real sample logs, every reason code, time conversion."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from router import DEFAULT_SYSLOG_YEAR, FORMATS, ParsedFragment
from router.errors import BUILTIN_REASONS, FormatError, MalformedLine
from router.format_registry import BuiltinFormat, load_format
from router.formats import parse_file, parse_line, with_time_unit
from router.formats_jsonl import JsonlFormat
from router.formats_sshd import _ADDRESSES
from router.memo import MEMO_SIZE

# The shared sample logs are read in place (a user's clone does not have them).
DATA = Path(__file__).resolve().parents[1] / "data"

AGENT = "Mozilla/5.0 (X11; Linux x86_64) Firefox/121.0"
APACHE = (
    '203.0.113.9 - - [10/Oct/2000:13:55:36 -0700] "GET /docs/index.html?x=1 HTTP/1.1" 200 2326 '
    f'"http://www.Example.com:8080/start" "{AGENT}"'
)
SSHD = (
    "Mar 27 13:08:09 ip-10-77-20-248 sshd[1361]: Accepted publickey for ubuntu "
    "from 85.245.107.41 port 54259 ssh2: RSA SHA256:abc"
)


def ms(*args: int) -> int:
    """UTC epoch milliseconds of a calendar time, computed independently of the parsers."""
    return int(datetime(*args, tzinfo=UTC).timestamp() * 1000)


def reason(fmt: BuiltinFormat, line: str, **kwargs: int) -> str:
    with pytest.raises(MalformedLine) as info:
        parse_line(fmt, line, **kwargs)
    assert info.value.reason in BUILTIN_REASONS
    return info.value.reason


def tally(fmt: BuiltinFormat, path: Path) -> tuple[list[ParsedFragment], Counter[str], list[int]]:
    parsed: list[ParsedFragment] = []
    reasons: Counter[str] = Counter()
    rejected_lines: list[int] = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            try:
                parsed.append(parse_line(fmt, line))
            except MalformedLine as exc:
                reasons[exc.reason] += 1
                rejected_lines.append(number)
    return parsed, reasons, rejected_lines


# -- the real sample logs ---------------------------------------------------------------


@pytest.fixture(scope="module")
def data_dir() -> Path:
    return DATA


def test_apache_sample_log(data_dir: Path) -> None:
    parsed, reasons, rejected_lines = tally("apache", data_dir / "apache_logs")
    assert len(parsed) == 9_999
    assert reasons == {"unparseable": 1}
    assert rejected_lines == [8_899]  # truncated inside the quoted user agent
    assert all(f.key == f"{f.fields['ip']}|{f.fields['agent']}" for f in parsed)
    times = [f.timestamp_ms for f in parsed]
    assert ms(2015, 5, 17) <= min(times) and max(times) < ms(2015, 5, 22)
    sites = Counter(f.fields["site"] for f in parsed)
    assert sites["-"] == 4_072 and sites["www.semicomplete.com"] == 3_038
    assert sum(f.fields["bytes"] == 0 for f in parsed) == 669  # logged as "-"


def test_auth_log_sample(data_dir: Path) -> None:
    parsed, reasons, _ = tally("sshd", data_dir / "auth.log")
    assert len(parsed) == 4_095
    assert reasons == {"not-sshd": 3_026}
    assert all(f.key == f"ip-10-77-20-248:{f.fields['pid']}" for f in parsed)
    # The log runs from Mar 27 to Apr 20 of the (default) syslog year.
    times = [f.timestamp_ms for f in parsed]
    assert min(times) == ms(DEFAULT_SYSLOG_YEAR, 3, 27, 13, 6, 56)
    assert max(times) == ms(DEFAULT_SYSLOG_YEAR, 4, 20, 14, 14, 29)
    # Regression guard for the user/ip heuristics (see docs/routing.md).
    # 2_295: "disconnected by user [preauth]" (2) and "user unknown" (331) name no user.
    assert sum(f.fields["user"] is not None for f in parsed) == 2_295
    assert sum(f.fields["ip"] is not None for f in parsed) == 2_785
    assert len({f.key for f in parsed}) == 1_062  # distinct sshd pids


# -- apache ---------------------------------------------------------------------------


def test_apache_fields_and_key() -> None:
    fragment = parse_line("apache", APACHE + "\n")
    assert fragment.key == f"203.0.113.9|{AGENT}"
    assert fragment.fields == {
        "ip": "203.0.113.9",
        "method": "GET",
        "path": "/docs/index.html?x=1",
        "protocol": "HTTP/1.1",
        "status": 200,
        "bytes": 2326,
        "referrer": "http://www.Example.com:8080/start",
        "agent": AGENT,
        "site": "www.example.com",
    }


@pytest.mark.parametrize(
    ("zone", "expected"),
    [
        ("-0700", ms(2000, 10, 10, 20, 55, 36)),
        ("+0000", ms(2000, 10, 10, 13, 55, 36)),
        ("+0530", ms(2000, 10, 10, 8, 25, 36)),
        ("+1400", ms(2000, 10, 9, 23, 55, 36)),  # crosses midnight backwards
    ],
)
def test_apache_zone_offset_is_honoured(zone: str, expected: int) -> None:
    line = APACHE.replace("-0700", zone)
    assert parse_line("apache", line).timestamp_ms == expected


@pytest.mark.parametrize(
    ("referrer", "site"),
    [
        ("-", "-"),
        ("/relative/page", "-"),
        ("https://user@Sub.Example.org/x?y", "sub.example.org"),
        ("android-app://com.google.android.gm", "com.google.android.gm"),
        ("http://[::1", "-"),  # malformed URL: no host rather than a crash
    ],
)
def test_apache_site_is_the_referrer_host(referrer: str, site: str) -> None:
    line = APACHE.replace("http://www.Example.com:8080/start", referrer)
    assert parse_line("apache", line).fields["site"] == site


def test_apache_keeps_escaped_quotes_and_dash_bytes() -> None:
    line = APACHE.replace(" 2326 ", " - ").replace(AGENT, r"Bot \"quoted\" 1.0")
    fragment = parse_line("apache", line)
    assert fragment.fields["bytes"] == 0
    assert fragment.key == r"203.0.113.9|Bot \"quoted\" 1.0"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("", "empty"),
        ("  \r\n", "empty"),
        (APACHE[:-10], "unparseable"),  # truncated inside the agent, like the sample log
        (APACHE.split(' "http')[0], "unparseable"),  # common log format: no referrer/agent
        (APACHE.replace('"GET /docs/index.html?x=1 HTTP/1.1"', '"-"'), "bad-request"),
        (APACHE.replace("HTTP/1.1", "FTP/1"), "bad-request"),
        (APACHE.replace("10/Oct/2000", "31/Sep/2000"), "bad-timestamp"),
        (APACHE.replace("Oct", "Okt"), "bad-timestamp"),
        (APACHE.replace("-0700", "+2400"), "bad-timestamp"),
        (APACHE.replace(" -0700", ""), "bad-timestamp"),
        (APACHE.replace("2000:13", "1969:13"), "bad-timestamp"),  # before the epoch
    ],
)
def test_apache_reasons(line: str, expected: str) -> None:
    assert reason("apache", line) == expected


# -- sshd -----------------------------------------------------------------------------


def test_sshd_fields_and_key() -> None:
    fragment = parse_line("sshd", SSHD + "\r\n")
    assert fragment.key == "ip-10-77-20-248:1361"
    assert fragment.timestamp_ms == ms(DEFAULT_SYSLOG_YEAR, 3, 27, 13, 8, 9)
    assert fragment.fields == {
        "host": "ip-10-77-20-248",
        "pid": 1361,
        "message": SSHD.split("]: ", 1)[1],
        "user": "ubuntu",
        "ip": "85.245.107.41",
    }


@pytest.mark.parametrize(
    ("message", "user", "ip"),
    [
        ("Failed password for invalid user  from 1.2.3.4 port 5 ssh2", "", "1.2.3.4"),
        ("Invalid user admin from 1.2.3.4", "admin", "1.2.3.4"),
        ("input_userauth_request: invalid user oracle [preauth]", "oracle", None),
        (
            "pam_unix(sshd:auth): authentication failure; logname= uid=0 euid=0 tty=ssh "
            "ruser= rhost=10.0.0.1  user=elastic_user_7",
            "elastic_user_7",
            "10.0.0.1",
        ),
        ("pam_unix(sshd:session): session opened for user bob(uid=1000) by (uid=0)", "bob", None),
        ("Received disconnect from 1.2.3.4 port 5:11: disconnected by user", None, "1.2.3.4"),
        ("Connection closed by 2001:db8::7 port 22 [preauth]", None, "2001:db8::7"),
        ("Server listening on 0.0.0.0 port 22.", None, None),
    ],
)
def test_sshd_user_and_ip(message: str, user: str | None, ip: str | None) -> None:
    fields = parse_line("sshd", f"Apr  1 00:00:00 h sshd[7]: {message}").fields
    assert (fields["user"], fields["ip"]) == (user, ip)


def test_sshd_addresses_are_remembered_as_ipaddress_reads_them_and_the_memo_stays_bounded() -> None:
    """The peer's address is `ipaddress`'s reading of the candidate, remembered: the same
    answer the first time, the second, and after the memo was cleared for being full."""
    cases = {
        "Connection closed by 2001:DB8:0:0::7 port 22": "2001:db8::7",  # its standard form
        "Connection closed by 01.2.3.4 port 22": None,  # leading zeros: not an address
        "Connection closed by 1.2.3.999 port 22": None,
        "Received disconnect from 5.6.7.8: 11: Bye": "5.6.7.8",  # without the colon
        "Did not receive identification string from ::: port 1": None,
    }

    def ip(message: str) -> str | None:
        return parse_line("sshd", f"Apr  1 00:00:00 h sshd[7]: {message}").fields["ip"]

    for _ in range(2):
        assert {message: ip(message) for message in cases} == cases
    for i in range(MEMO_SIZE + 10):  # more distinct peers than the memo keeps
        assert ip(f"Connection closed by 10.{i // 65536}.{i // 256 % 256}.{i % 256} port 2")
    assert len(_ADDRESSES) <= MEMO_SIZE
    assert {message: ip(message) for message in cases} == cases


def test_sshd_year_parameter_and_space_padded_day() -> None:
    line = "Apr  1 02:03:04 host sshd[42]: Connection closed by 1.2.3.4 port 5"
    assert parse_line("sshd", line).timestamp_ms == ms(DEFAULT_SYSLOG_YEAR, 4, 1, 2, 3, 4)
    assert parse_line("sshd", line, year=2017).timestamp_ms == ms(2017, 4, 1, 2, 3, 4)


def test_sshd_default_year_accepts_feb_29() -> None:
    line = "Feb 29 12:00:00 host sshd[42]: Disconnected from 1.2.3.4 port 5"
    assert parse_line("sshd", line).timestamp_ms == ms(DEFAULT_SYSLOG_YEAR, 2, 29, 12)
    assert reason("sshd", line, year=2001) == "bad-timestamp"


def test_sshd_rfc3339_header_and_sshd_session() -> None:
    line = "2024-03-27T13:08:09.123456+01:00 web1 sshd-session[99]: Disconnected from 1.2.3.4"
    fragment = parse_line("sshd", line, year=1999)  # the header's own year wins
    assert fragment.key == "web1:99"
    assert fragment.timestamp_ms == ms(2024, 3, 27, 12, 8, 9) + 123


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("\n", "empty"),
        ("sshd[1]: no header", "unparseable"),
        ("Mar 27 13:06:56 ip-10-77-20-248", "unparseable"),
        ("Mar 27 13:06:56 h CRON[1264]: pam_unix(cron:session): session opened", "not-sshd"),
        ("Mar 27 13:09:37 h sudo:   ubuntu : COMMAND=/usr/sbin/service sshd restart", "not-sshd"),
        ("Mar 27 13:09:37 h sshd: no pid", "not-sshd"),
        ("Mar 32 13:09:37 h sshd[1]: x", "bad-timestamp"),
        ("Foo 10 13:09:37 h sshd[1]: x", "bad-timestamp"),
        ("Mar 10 25:09:37 h sshd[1]: x", "bad-timestamp"),
        ("2024-13-01T00:00:00Z h sshd[1]: x", "bad-timestamp"),
    ],
)
def test_sshd_reasons(line: str, expected: str) -> None:
    assert reason("sshd", line) == expected


# -- jsonl ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ts", "expected"),
    [
        ("1704067200000", 1_704_067_200_000),
        ('"2024-01-01T00:00:00Z"', ms(2024, 1, 1)),
        ('"2024-01-01T02:00:00.1239+02:00"', ms(2024, 1, 1) + 123),
        ('"2024-01-01T00:00:00"', ms(2024, 1, 1)),  # no zone: UTC
        ("0", 0),
    ],
)
def test_jsonl_timestamps(ts: str, expected: int) -> None:
    assert parse_line("jsonl", f'{{"key": "k", "ts": {ts}}}').timestamp_ms == expected


def test_jsonl_key_and_other_fields() -> None:
    fragment = parse_line("jsonl", '\ufeff{"key": "user-1", "ts": 5, "page": "/a", "n": [1]}\n')
    assert fragment == ParsedFragment("user-1", 5, {"page": "/a", "n": [1]})


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("   ", "empty"),
        ("{not json", "bad-json"),
        ('["key", "ts"]', "bad-json"),
        ("[" * 100_000, "bad-json"),
        ('{"ts": 1}', "missing-key"),
        ('{"key": 7, "ts": 1}', "missing-key"),
        ('{"key": "", "ts": 1}', "missing-key"),
        ('{"key": "k"}', "bad-timestamp"),
        ('{"key": "k", "ts": 1.5}', "bad-timestamp"),
        ('{"key": "k", "ts": true}', "bad-timestamp"),
        ('{"key": "k", "ts": -1}', "bad-timestamp"),
        ('{"key": "k", "ts": 9223372036854775808}', "bad-timestamp"),
        ('{"key": "k", "ts": "yesterday"}', "bad-timestamp"),
        ('{"key": "k", "ts": "1969-12-31T23:59:59Z"}', "bad-timestamp"),
    ],
)
def test_jsonl_reasons(line: str, expected: str) -> None:
    assert reason("jsonl", line) == expected


@pytest.mark.parametrize(
    ("ts", "expected"),
    [
        ("1704067200", 1_704_067_200_000),
        ("1704067200.123", 1_704_067_200_123),
        ("1704067200.1235", 1_704_067_200_124),  # rounded to the millisecond, by every producer
        ("0", 0),
        ('"2024-01-01T00:00:00Z"', ms(2024, 1, 1)),  # a string says its own unit
    ],
)
def test_jsonl_times_in_seconds(ts: str, expected: int) -> None:
    seconds = JsonlFormat(time_unit="s")
    assert seconds.parse(f'{{"key": "k", "ts": {ts}}}').timestamp_ms == expected


@pytest.mark.parametrize(
    "ts", ["-1", "-0.5", "true", "1e300", "9223372036854776", '"yesterday"']
)  # fmt: skip
def test_jsonl_seconds_out_of_range_or_not_times_are_rejected_as_lines(ts: str) -> None:
    with pytest.raises(MalformedLine) as caught:
        JsonlFormat(time_unit="s").parse(f'{{"key": "k", "ts": {ts}}}')
    assert caught.value.reason == "bad-timestamp"


def test_a_float_of_milliseconds_names_the_unit_that_takes_fractions() -> None:
    with pytest.raises(MalformedLine, match="--time-unit s"):
        parse_line("jsonl", '{"key": "k", "ts": 1704067200.5}')


def test_a_time_unit_for_a_format_without_one_is_refused_not_ignored() -> None:
    assert with_time_unit(load_format("jsonl"), "s") == JsonlFormat(time_unit="s")
    assert with_time_unit(load_format("apache"), None) == load_format("apache")
    with pytest.raises(FormatError, match="jsonl format only, not 'apache'"):
        with_time_unit(load_format("apache"), "s")


# -- the dispatcher -------------------------------------------------------------------


def test_formats_are_the_documented_three() -> None:
    assert FORMATS == ("apache", "sshd", "jsonl")


def test_unknown_format_is_a_caller_error_not_a_bad_line() -> None:
    with pytest.raises(FormatError, match="unknown input format 'csv'"):
        parse_line("csv", "a,b")


def test_malformed_line_message_names_reason_and_detail() -> None:
    with pytest.raises(MalformedLine, match=r"malformed line \(bad-json\): expected an object"):
        parse_line("jsonl", "[]")


def test_parse_file_keeps_the_good_lines_in_order(tmp_path: Path) -> None:
    log = tmp_path / "mixed.jsonl"
    log.write_text('{"key": "a", "ts": 1}\nnot json\n\n{"key": "b", "ts": 2}\r\n')
    assert [(f.key, f.timestamp_ms) for f in parse_file(log, "jsonl")] == [("a", 1), ("b", 2)]
