"""`sessionizer status` as people read it: 80 columns by default, every column with -o wide."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from balancer.status import TABLE_WIDTH, format_table, stream_lag, stream_state
from framework.commands.status import frame, render

APP = "sessionizer"
NODES = ("ip-10-0-3-17-48211", "ip-10-0-3-18-48212", "ip-10-0-3-19-48213")
WIDE_HEADERS = ["EPOCH", "LOAD", "BUSY", "REPLAYED", "HANDOVER", "SAFE_OFFSET",
                "COMMITTED_OFFSET", "END_OFFSET", "IGNORED"]  # fmt: skip


def _row(index: int, owner: str | None, **changes: Any) -> dict[str, Any]:
    """A stream row with every field `status --json` gives today."""
    row = {
        "name": f"{APP}.stream.{index:04d}",
        "owner": owner,
        "epoch": 12,
        "corrupt": None,
        "load": 1234.5,
        "busy": 0.0123,
        "replayed": 0,
        "handover": True,
        "safe_offset": 9_812_301,
        "committed_offset": 10_000_000,
        "end_offset": 10_004_211,
        "open_sessions": 31_402,
        "ignored": 14,
        "lag": None,
    }
    row.update(changes)
    row["lag"] = stream_lag(row)
    return row


def _status(rows: list[dict[str, Any]], nodes: tuple[str, ...] = NODES) -> dict[str, Any]:
    consumers = [
        {"id": node, "streams": [r["name"] for r in rows if r["owner"] == node]} for node in nodes
    ]
    return {
        "app": APP,
        "auth": "digest",
        "balance": "count+load",
        "consumers": consumers,
        "node_loads": {node: 26_000.25 for node in nodes},
        "streams": rows,
        "errors": [],
    }


def _sixty_four(**changes: Any) -> dict[str, Any]:
    rows = [_row(i, NODES[i % 3], **changes) for i in range(64)]
    rows[5] = _row(5, None, corrupt="bad marker byte", safe_offset=None, committed_offset=None)
    rows[6] = _row(6, None)
    rows[7] = _row(7, NODES[1], committed_offset=10_004_211, handover=False, replayed=None)
    return _status(rows)


def _split(table: str) -> list[list[str]]:
    return [line.split() for line in table.splitlines()]


def _cells(table: str, stream: int) -> list[str]:
    name = f"{APP}.stream.{stream:04d}"
    return next(line.split() for line in table.splitlines() if line.startswith(name + " "))


def test_the_default_table_fits_80_columns_with_64_streams() -> None:
    table = format_table(_sixty_four())
    assert max(len(line) for line in table.splitlines()) <= TABLE_WIDTH
    assert ["STREAM", "OWNER", "LAG", "OPEN", "STATE"] in _split(table)
    assert _cells(table, 0) == [f"{APP}.stream.0000", NODES[0], "4211", "31402", "behind"]
    assert _cells(table, 5) == [f"{APP}.stream.0005", "-", "-", "31402", "corrupt"]
    assert _cells(table, 6)[1:] == ["-", "4211", "31402", "unowned"]
    assert _cells(table, 7)[2:] == ["0", "31402", "caught-up"]
    assert sum(1 for line in table.splitlines() if line.startswith(f"{APP}.stream.")) == 64 + 1
    assert table.splitlines()[-1] == f"{APP}.stream.0005: bad marker byte"  # the reasons follow


def test_wide_has_every_column_of_the_rows_formatted_not_as_python_reprs() -> None:
    table = format_table(_sixty_four(), wide=True)
    header = next(line.split() for line in table.splitlines() if line.startswith("STREAM"))
    assert header == ["STREAM", "OWNER", "LAG", "OPEN", "STATE", *WIDE_HEADERS]
    assert _cells(table, 0)[5:] == ["12", "1234.5", "0.01", "0", "yes", "9812301", "10000000",
                                    "10004211", "14"]  # fmt: skip
    assert _cells(table, 7)[8:10] == ["-", "no"]
    for word in ("True", "False", "None"):
        assert word not in table.split()


def test_long_owner_names_are_cut_to_fit_and_shown_whole_in_wide() -> None:
    long = ("sessionizer-nodes-7d9f8b6c5-x2x4z-1", "sessionizer-nodes-7d9f8b6c5-kq9vt-1")
    rows = [_row(i, long[i % 2]) for i in range(64)]
    table = format_table(_status(rows, long))
    assert max(len(line) for line in table.splitlines()) <= TABLE_WIDTH
    assert _cells(table, 0)[1].endswith("..")
    assert _cells(format_table(_status(rows, long), wide=True), 0)[1] == long[0]


def test_dead_letters_are_a_default_column_when_they_fit_else_a_wide_one() -> None:
    short = ("n1", "n2", "n3")
    rows = [_row(i, short[i % 3], dead_letters=i * 100) for i in range(64)]
    table = format_table(_status(rows, short))
    assert ["STREAM", "OWNER", "LAG", "OPEN", "DEAD", "STATE"] in _split(table)
    assert _cells(table, 3) == [f"{APP}.stream.0003", "n1", "4211", "31402", "300", "behind"]

    big = {"open_sessions": 1_000_000_000, "end_offset": 10**12}  # wide numbers: no room left
    rows = [_row(i, NODES[i % 3], dead_letters=i * 100, **big) for i in range(64)]
    crowded = format_table(_status(rows))
    assert max(len(line) for line in crowded.splitlines()) <= TABLE_WIDTH
    assert "DEAD" not in crowded.split()
    assert "DEAD" in format_table(_status(rows), wide=True).split()


def test_every_line_above_the_table_fits_too() -> None:
    status = {**_sixty_four(), "auth": "open"}
    for auth in ("open", "digest"):
        lines = format_table({**status, "auth": auth}).splitlines()
        assert max(len(line) for line in lines) <= TABLE_WIDTH, lines[:3]


def test_the_settings_the_members_share_are_one_line_under_the_header() -> None:
    status = {**_sixty_four(), "settings": {"delivery": "at-least-once+exactly-once"}}
    lines = format_table(status).splitlines()
    assert lines[2] == "balance: count+load, delivery: at-least-once+exactly-once"
    alone = format_table({**status, "balance": None, "settings": {}}).splitlines()
    assert not any(line.startswith(("balance", "delivery")) for line in alone)


@pytest.mark.parametrize(
    ("changes", "lag", "state"),
    [
        ({}, 4211, "behind"),
        ({"committed_offset": 10_004_211}, 0, "caught-up"),
        ({"end_offset": None}, None, "owned"),  # Kafka could not be read
        ({"owner": None}, 4211, "unowned"),
        ({"corrupt": "x", "committed_offset": None}, None, "corrupt"),
    ],
)
def test_lag_is_end_minus_committed_and_state_follows(
    changes: dict[str, Any], lag: int | None, state: str
) -> None:
    row = {**_row(0, "n1"), **changes}
    assert (stream_lag(row), stream_state(row)) == (lag, state)


def test_json_output_is_the_document_with_lag_and_errors() -> None:
    status = _sixty_four()
    parsed = json.loads(render(status, "json"))
    assert parsed["errors"] == [] and parsed["streams"][0]["lag"] == 4211
    assert render(status, "wide") == format_table(status, wide=True)


def test_watch_frames_carry_a_timestamp_and_are_separated_when_piped() -> None:
    now = datetime(2026, 11, 26, 5, 30, 1, tzinfo=UTC)
    piped = frame("TABLE", now=now, terminal=False)
    assert piped.splitlines()[0] == ""  # a blank line between frames, never escape codes
    assert piped.splitlines()[1].startswith("2026-11-26 05:30:01 UTC")
    assert piped.splitlines()[2] == "TABLE" and "\x1b" not in piped
    on_terminal = frame("TABLE", now=now, terminal=True)
    assert on_terminal.startswith("\x1b[H\x1b[2J2026-11-26 05:30:01 UTC")
