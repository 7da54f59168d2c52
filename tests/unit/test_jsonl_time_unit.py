"""`sessionizer produce --format jsonl --time-unit s`: epoch seconds sent as milliseconds; a
unit for a format without one is refused before any server is asked."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from framework.cli import main
from framework.testing.cli import DATA
from framework.testing.producer import RecordingTransport, record_produce_command, sent_times

SERVERS = ["--zk", "127.0.0.1:1", "--bootstrap", "127.0.0.1:1"]  # nothing listens on port 1


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordingTransport]:
    """`produce` with its producer on a transport that keeps what it is given."""
    yield record_produce_command(monkeypatch)


def _produce(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["produce", *argv, *SERVERS, "--json"])
    return code, err.getvalue()


def test_epoch_seconds_are_sent_as_milliseconds_without_the_1970_warning(
    sent: RecordingTransport, tmp_path: Path
) -> None:
    log = tmp_path / "seconds.jsonl"
    log.write_text(
        '{"key": "u1", "ts": 1700000000, "page": "/a"}\n'
        '{"key": "u1", "ts": 1700000060.25, "page": "/b"}\n'
    )
    code, err = _produce(str(log), "--format", "jsonl", "--time-unit", "s")
    assert code == 0, err
    assert sent_times(sent) == [1_700_000_000_000, 1_700_000_060_250]
    assert "event_time_near_epoch" not in err
    # Without the unit, the same file is read as milliseconds of 1970, and warned of.
    sent.records.clear()
    log.write_text('{"key": "u1", "ts": 1700000000, "page": "/a"}\n')
    code, err = _produce(str(log), "--format", "jsonl")
    assert code == 0 and "event_time_near_epoch" in err and "--time-unit s" in err


def test_a_time_unit_for_the_apache_format_is_refused_in_one_line() -> None:
    code, err = _produce(str(DATA / "apache_logs"), "--format", "apache", "--time-unit", "s")
    assert code == 2
    assert err.count("\n") == 1 and "--time-unit applies to the built-in jsonl format" in err
