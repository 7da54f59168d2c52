"""Bring your own format: a CSV format and a processor in a user's module, end to end.

The test writes a module into a temporary directory, as a user would: a `Format`
for `user,ts_iso,page` rows and a `StreamProcessor`.  `sessionizer produce FILE
--format MODULE:CSV` loads the format by name, a `sessionizer node` process loads
the processor through PYTHONPATH, and the sessions written must be exactly those
of the batch definition, and those the data was generated from.
"""

from __future__ import annotations

import csv
import io
import os
import random
import textwrap
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from framework.kernel.config import ConnectionConfig
from framework.kernel.zookeeper import zookeeper_client
from framework.node.loader import load_processor
from framework.sessions import read_sessions
from framework.testing.cli import cli_json
from framework.testing.members import wait_for
from framework.testing.nodes import NodeGroup, settled, streams_of
from framework.verify import expected_sessions, verify_sessions
from router import load_format
from router.formats import parse_file

pytestmark = pytest.mark.integration
STREAMS = 4
TIMEOUT_MIN = 10  # the processor's inactivity timeout, in minutes

USER_MODULE = '''
"""A user's own input format and processor (written by tests/integration/test_custom_format.py)."""

import csv
from datetime import UTC, datetime, timedelta

from framework import StreamProcessor
from router import MalformedLine, ParsedFragment

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class CsvVisits:
    """Rows `user,ts_iso,page`: the key is the user, the time an ISO-8601 time with a zone."""

    name = "csv-visits"

    def parse(self, line):
        row = next(csv.reader([line]))
        if len(row) != 3:
            raise MalformedLine("bad-columns", f"{len(row)} columns, expected 3")
        user, ts, page = row
        try:
            moment = datetime.fromisoformat(ts)
        except ValueError as exc:
            raise MalformedLine("bad-time", f"{ts!r} is not ISO-8601") from exc
        if moment.tzinfo is None:
            raise MalformedLine("bad-time", f"{ts!r} has no zone")
        return ParsedFragment(user, (moment - _EPOCH) // timedelta(milliseconds=1), {"page": page})


CSV = CsvVisits()


class PageVisits(StreamProcessor):
    """A visit: the pages a user saw, ended by 10 idle minutes or by /logout."""

    timeout = 10 * 60
    grace = 60

    def is_end(self, fragment):
        return fragment["page"] == "/logout"

    def open(self, key, fragment):
        return {"pages": []}

    def update(self, session, fragment):
        session["pages"].append(fragment["page"])

    def close(self, key, session):
        return {"user": key, "pages": session["pages"]}
'''

PAGES = ("/", "/products", "/products/42", "/cart", '/search?q="red, shoes"', "/help")
Visit = tuple[str, list[tuple[datetime, str]]]


def _visits(seed: int) -> list[Visit]:
    """Visits of 10 users: in-visit gaps under the timeout; visits apart by more, or by /logout."""
    rng = random.Random(seed)
    visits: list[Visit] = []
    for number in range(10):
        user = f"user-{number}"
        clock = datetime(2024, 3, 1, 8, 0, tzinfo=UTC) + timedelta(minutes=rng.randrange(60))
        for _ in range(rng.randint(5, 8)):
            pages = [(clock, "/")]
            for _ in range(rng.randint(0, 9)):
                clock += timedelta(seconds=rng.randint(10, (TIMEOUT_MIN - 2) * 60))
                pages.append((clock, rng.choice(PAGES)))
            logout = rng.random() < 0.3
            if logout:
                clock += timedelta(seconds=rng.randint(5, 60))
                pages.append((clock, "/logout"))
            visits.append((user, pages))
            # After /logout the next visit may begin within the timeout: only is_end splits.
            pause = rng.randint(1, 5) if logout else rng.randint(TIMEOUT_MIN + 5, 240)
            clock += timedelta(minutes=pause)
    return visits


def _csv(visits: list[Visit], malformed: str) -> str:
    """The rows by time, some times written in other zones, with one malformed row inside."""
    rows = sorted((moment, user, page) for user, pages in visits for moment, page in pages)
    zones = [UTC, timezone(timedelta(hours=2)), timezone(timedelta(hours=-5, minutes=-30))]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for index, (moment, user, page) in enumerate(rows):
        writer.writerow([user, moment.astimezone(zones[index % 3]).isoformat(), page])
        if index == len(rows) // 2:
            out.write(malformed + "\n")
    return out.getvalue()


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The user's module, importable here (sys.path) and in child processes (PYTHONPATH)."""
    code = tmp_path / "code"
    code.mkdir()
    name = f"my_formats_{uuid.uuid4().hex[:8]}"
    (code / f"{name}.py").write_text(textwrap.dedent(USER_MODULE).lstrip())
    monkeypatch.syspath_prepend(str(code))
    inherited = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", f"{code}{os.pathsep}{inherited}" if inherited else str(code))
    return name


def test_a_csv_format_from_a_users_module_gives_exact_sessions(
    zk_hosts: str, kafka_bootstrap: str, app: str, tmp_path: Path, user_module: str
) -> None:
    visits = _visits(seed=14)
    rows = sum(len(pages) for _, pages in visits)
    data = tmp_path / "visits.csv"
    data.write_text(_csv(visits, malformed="user-3,yesterday at noon,/cart"))
    assert rows >= 200 and sum(p[-1][1] == "/logout" for _, p in visits) >= 5

    conn = {"zk": zk_hosts, "bootstrap": kafka_bootstrap, "app": app}
    cli_json("streams", "create", "--count", str(STREAMS), **conn)
    spec = f"{user_module}:CSV"
    stats = cli_json("produce", str(data), "--format", spec, "--end-of-input", "--json", **conn)
    assert stats == {
        "read": rows + 1,
        "parsed": rows,
        "rejected": 1,
        "sent": rows,
        "reasons": {"bad-time": 1},
    }

    connection = ConnectionConfig(zk_hosts, kafka_bootstrap, app)
    streams = streams_of(app, STREAMS)
    nodes = tmp_path / "nodes"
    nodes.mkdir()
    processor = f"{user_module}:PageVisits"
    with NodeGroup(connection, nodes, processor) as group, zookeeper_client(zk_hosts) as zk:
        group.start("n1")
        wait_for(lambda: settled(zk, connection, ["n1"], streams), 120, "the node to catch up")
    written = read_sessions(kafka_bootstrap, app, deduplicate=False)

    fragments = parse_file(data, load_format(spec))
    expected = expected_sessions(fragments, load_processor(processor))
    result = verify_sessions(written, expected, len(fragments))
    print(f"\ncustom CSV format: {rows} rows, {len(visits)} visits; {result.line()}")
    assert result.exact and result.duplicates == 0, result
    assert result.expected == len(visits)  # the batch definition finds the generated visits
    assert _pages_by_visit(written) == {
        (user, _ms(pages[0][0]), _ms(pages[-1][0])): [page for _, page in pages]
        for user, pages in visits
    }


def _ms(moment: datetime) -> int:
    return int(moment.timestamp()) * 1000


def _pages_by_visit(written: list[dict[str, Any]]) -> dict[tuple[str, int, int], list[str]]:
    """The processor's result of each session: its user and the pages in order."""
    assert all(s["user"] == s["key"] for s in written)
    return {(s["key"], s["first_ts"], s["last_ts"]): s["pages"] for s in written}
