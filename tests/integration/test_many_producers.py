"""Two producers on the same streams, at different speeds, one ending first (issue 13, part 3).

Real servers: two `sessionizer produce` processes replay the two halves of the
Apache log (alternate lines, so both cover the whole log and share keys). The
slow one reads its half from a pipe, in small bursts the test writes while the
fast one reads a file. Both are registered in ZooKeeper before either sends a
fragment. The fast one ends first: the streams must not reach the end of input
until the slow one ends too; then the sessions equal the batch definition of
both halves, and no fragment was dead-lettered.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from framework.kernel.config import ConnectionConfig
from framework.kernel.watermark import LEFT, Watermark
from framework.kernel.zookeeper import zookeeper_client
from framework.provision import provision_streams
from framework.sessions import read_sessions
from framework.testing.cli import DATA, cli_json
from framework.testing.members import wait_for
from framework.testing.nodes import NodeGroup, caught_up, settled, streams_of
from framework.verify import expected_sessions, verify_sessions
from router.errors import MalformedLine
from router.formats import parse_line
from router.naming import deadletter_topic
from router.readback import read_topics
from router.wire import decode_record
from sessionizer import SessionEngine
from sessionizer.examples.weblog import WebSessions

pytestmark = pytest.mark.integration
STREAMS = 4
SESSIONIZER = str(Path(sys.executable).with_name("sessionizer"))
PROCESSOR = "tests.integration.test_many_producers:PatientWebSessions"


class PatientWebSessions(WebSessions):
    """`WebSessions` waiting for the slowest live producer however far behind (the replay
    runs one producer days of event time ahead of the other)."""

    max_producer_skew = None


def _halves() -> tuple[list[str], list[str]]:
    path = DATA / "apache_logs"
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
    return lines[0::2], lines[1::2]


def _fragments(lines: list[str]) -> list:
    parsed = []
    for line in lines:
        try:
            parsed.append(parse_line("apache", line))
        except MalformedLine:
            continue
    return parsed


@contextmanager
def _producer(
    connection: ConnectionConfig, producer_id: str, source: str, log: Path
) -> Iterator[subprocess.Popen[str]]:
    """`sessionizer produce SOURCE --producer-id ID --end-of-input`; killed if still running."""
    command = [
        SESSIONIZER, "produce", source, "--format", "apache", "--producer-id", producer_id,
        "--end-of-input", "--json", "--zk", connection.zk, "--bootstrap", connection.bootstrap,
        "--app", connection.app,
    ]  # fmt: skip
    with log.open("w") as errors:
        process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, text=True
        )
        try:
            yield process
        finally:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=30)
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    stream.close()


def _registered(
    zk: KazooClient, connection: ConnectionConfig, producer_id: str, process: subprocess.Popen[str]
) -> bool:
    """The producer's znode says its `joined` markers are in every stream."""
    assert process.poll() is None, f"producer {producer_id} exited with {process.returncode}"
    try:
        data, _stat = zk.get(connection.paths.producer(producer_id))
    except NoNodeError:
        return False
    return bool(json.loads(data).get("joined"))


def _finish(process: subprocess.Popen[str], log: Path) -> dict:
    """Close its input, wait for a producer to exit 0 and return its `--json` counters."""
    out, _ = process.communicate(timeout=300)
    assert process.returncode == 0, log.read_text()[-2000:]
    return json.loads(out.strip().splitlines()[-1])


def _feed(pipe: IO[str] | None, lines: list[str]) -> None:
    assert pipe is not None
    pipe.write("".join(lines))
    pipe.flush()


def test_two_producers_at_different_speeds_give_the_exact_sessions(
    zk_hosts: str, kafka_bootstrap: str, app: str, tmp_path: Path
) -> None:
    connection = ConnectionConfig(zk_hosts, kafka_bootstrap, app)
    provision_streams(connection, STREAMS)
    streams = streams_of(app, STREAMS)
    fast_lines, slow_lines = _halves()
    # Each round the fast producer gets 500 lines, the slow one 250: the fast one ends
    # half-way through the slow one's input.
    fast_bursts = [fast_lines[i : i + 500] for i in range(0, len(fast_lines), 500)]
    slow_bursts = [slow_lines[i : i + 250] for i in range(0, len(slow_lines), 250)]
    conn = {"zk": zk_hosts, "bootstrap": kafka_bootstrap, "app": app}

    with (
        NodeGroup(connection, tmp_path, PROCESSOR) as group,
        zookeeper_client(zk_hosts) as zk,
        _producer(connection, "slow", "-", tmp_path / "slow.err") as slow,
    ):
        for node in ("n1", "n2"):
            group.start(node)
        wait_for(lambda: _registered(zk, connection, "slow", slow), 60, "the slow producer joined")
        with _producer(connection, "fast", "-", tmp_path / "fast.err") as fast:
            wait_for(
                lambda: _registered(zk, connection, "fast", fast), 60, "the fast producer joined"
            )
            # Bursts in turn (a full pipe makes the test wait for its reader): both write
            # the streams at the same time, at different speeds.
            for fast_burst, slow_burst in zip(fast_bursts, slow_bursts, strict=False):
                _feed(fast.stdin, fast_burst)
                _feed(slow.stdin, slow_burst)
            fast_stats = _finish(fast, tmp_path / "fast.err")
        wait_for(lambda: settled(zk, connection, ["n1", "n2"], streams), 120, "catch-up")
        status = cli_json("status", "--json", **conn)
        open_after_fast = sum(row["open_sessions"] for row in status["streams"])
        assert open_after_fast > 0, "the fast producer's end closed the slow one's sessions"

        for burst in slow_bursts[len(fast_bursts) :]:
            _feed(slow.stdin, burst)
        slow_stats = _finish(slow, tmp_path / "slow.err")
        wait_for(lambda: caught_up(zk, connection, streams), 120, "the slow producer's end")
        status = cli_json("status", "--json", **conn)
        assert [row["open_sessions"] for row in status["streams"]] == [0] * STREAMS
        assert zk.get_children(connection.paths.producers) == []

    fragments = _fragments(fast_lines) + _fragments(slow_lines)
    assert fast_stats["sent"] + slow_stats["sent"] == len(fragments)
    written = read_sessions(kafka_bootstrap, app, deduplicate=False)
    expected = expected_sessions(fragments, PatientWebSessions())
    result = verify_sessions(written, expected, len(fragments))
    letters = read_topics(kafka_bootstrap, [deadletter_topic(app)])[deadletter_topic(app)]
    reasons = Counter(dict(letter.headers).get("reason", b"").decode() for letter in letters)
    print(f"\ntwo producers: {result.line()}; open sessions after the fast one ended "
          f"{open_after_fast}; dead letters {dict(reasons)}")  # fmt: skip
    assert not reasons  # nothing late, nothing undecodable
    assert result.exact, result
    assert _interleaved(kafka_bootstrap, streams), "the producers did not write at the same time"


def _interleaved(bootstrap: str, streams: list[str]) -> bool:
    """Some stream has a watermark of the slow producer before the fast one's end of input."""
    for records in _records(bootstrap, streams).values():
        ended = [i for i, (_, r) in enumerate(records) if _is_end(r, "fast")]
        if any(_marks(r, "slow", None) for _, r in records[: ended[0]]):
            return True
    return False


def _is_end(record: Any, producer_id: str) -> bool:
    return isinstance(record, Watermark) and record.end and record.producer == producer_id


def _records(bootstrap: str, streams: list[str]) -> dict[str, list[tuple[int, Any]]]:
    """Every stream's records as (offset, decoded fragment or watermark)."""
    return {
        topic: [
            (r.offset, decode_record(r.key, r.value, r.headers, r.timestamp, offset=r.offset))
            for r in batch
        ]
        for topic, batch in read_topics(bootstrap, streams).items()
    }


def _marks(record: Any, producer_id: str, marker: str | None) -> bool:
    """A watermark of that producer, of that kind (None: an ordinary watermark)."""
    return isinstance(record, Watermark) and (record.producer, record.marker) == (
        producer_id,
        marker,
    )


def _left_for(bootstrap: str, streams: list[str], producer_id: str) -> bool:
    """Every stream holds a `left` marker naming the producer."""
    return all(
        any(
            isinstance(r, Watermark) and (r.producer, r.marker) == (producer_id, LEFT)
            for _, r in rs
        )
        for rs in _records(bootstrap, streams).values()
    )


def test_a_killed_producer_is_declared_left_by_a_survivor_whose_end_ends_the_input(
    zk_hosts: str, kafka_bootstrap: str, app: str, tmp_path: Path
) -> None:
    connection = ConnectionConfig(zk_hosts, kafka_bootstrap, app)
    provision_streams(connection, STREAMS)
    streams = streams_of(app, STREAMS)
    first, second = _halves()
    with (
        zookeeper_client(zk_hosts) as zk,
        _producer(connection, "victim", "-", tmp_path / "victim.err") as victim,
    ):
        wait_for(lambda: _registered(zk, connection, "victim", victim), 60, "the victim joined")
        # The survivor starts once the victim is registered: it must know it to miss it.
        with _producer(connection, "survivor", "-", tmp_path / "survivor.err") as survivor:
            wait_for(lambda: _registered(zk, connection, "survivor", survivor), 60, "joined")
            _feed(victim.stdin, first[:500])
            _feed(survivor.stdin, second[:500])
            victim.kill()  # no end of input, no `left` of its own: its znode expires
            victim.wait(timeout=30)
            gone = connection.paths.producer("victim")
            wait_for(lambda: zk.exists(gone) is None, 60, "the victim's znode to expire")
            # The survivor's input stays quiet (a live log with nothing new): it must still
            # look at the registry, and declare the victim left, without another line.
            wait_for(
                lambda: _left_for(kafka_bootstrap, streams, "victim"),
                120,
                "the quiet survivor's `left` markers for the victim",
                interval=0.5,
            )
            _feed(survivor.stdin, second[500:])
            _finish(survivor, tmp_path / "survivor.err")
    # The log alone decides: replayed into fresh engines, every stream reaches its end.
    for topic, records in _records(kafka_bootstrap, streams).items():
        engine = SessionEngine(topic, PatientWebSessions())
        for offset, record in records:
            if isinstance(record, Watermark):
                engine.process(record)
            else:
                engine.process_fragment(offset, record.key, record.timestamp_ms, record.fields)
        assert engine.counters.open_sessions == 0, topic
