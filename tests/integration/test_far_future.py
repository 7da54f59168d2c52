"""One line of a broken clock on real servers (docs/sessions.md, "Records dated far ahead";
docs/routing.md, "Watermarks"): the real Apache log (2015) with one of its lines dated
nine years on, through a real producer and a node that is killed with `kill -9` while
that line waits for its verdict.  The next node replays it and refutes it: one `future:`
dead letter, every other session exactly the batch definition's, and no watermark dated
that far (the producer's clock did not take the jump either).  The line is dated in the
past: Kafka 4 brokers refuse a record dated more than an hour ahead of their own clock
(`log.message.timestamp.after.max.ms`)."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kafka.admin import ConfigResource, ConfigResourceType

from framework.kafka.admin import admin_client
from framework.kernel.config import ConnectionConfig
from framework.kernel.watermark import Watermark
from framework.kernel.zookeeper import zookeeper_client
from framework.progress import end_offsets
from framework.provision import provision_streams
from framework.sessions import read_sessions
from framework.testing.cli import DATA, cli, cli_json
from framework.testing.members import wait_for
from framework.testing.nodes import NodeGroup, settled, streams_of
from framework.verify import expected_sessions, verify_sessions
from router.formats import parse_file
from router.hashing import stream_for_key
from router.ingest import produce_fragments
from router.naming import stream_name
from router.producer import ProducerConfig, StreamProducer
from router.readback import read_topics
from router.wire import decode_record
from sessionizer.examples.weblog import WebSessions

pytestmark = pytest.mark.integration
STREAMS = 4
WEBLOG = "sessionizer.examples.weblog:WebSessions"
NINE_YEARS = 9 * 365 * 24 * 3_600_000
YEAR_2100 = 4_102_444_800_000


def test_a_line_dated_years_ahead_is_one_dead_letter_across_a_kill_and_moves_no_clock(
    zk_hosts: str, kafka_bootstrap: str, app: str, tmp_path: Path
) -> None:
    connection = ConnectionConfig(zk_hosts, kafka_bootstrap, app)
    provision_streams(connection, STREAMS)
    fragments = parse_file(DATA / "apache_logs", "apache")
    half = len(fragments) // 2
    line = fragments[half]
    broken = replace(line, timestamp_ms=line.timestamp_ms + NINE_YEARS)  # a typo in the year
    stream = stream_name(app, stream_for_key(broken.key, STREAMS))
    servers = {"zk": zk_hosts, "bootstrap": kafka_bootstrap, "app": app}
    with NodeGroup(connection, tmp_path, WEBLOG) as group, zookeeper_client(zk_hosts) as zk:
        group.start("n1")
        with StreamProducer(ProducerConfig(kafka_bootstrap, app, STREAMS)) as producer:
            produce_fragments(producer, fragments[:half])
            produce_fragments(producer, [broken])  # flushed: the last record of its stream
            offset = end_offsets(kafka_bootstrap, [stream])[stream] - 1
            # n1 read past it and committed: it waits there for the next record's verdict.
            wait_for(
                lambda: _committed_past(cli_json("status", "--json", **servers), stream, offset),
                120,
                f"n1 committed past {stream}@{offset}",
            )
            group.nodes["n1"].send(signal.SIGKILL)
            group.start("n2")
            produce_fragments(producer, fragments[half:], end_of_input=True)
        streams = streams_of(app, STREAMS)
        wait_for(lambda: settled(zk, connection, ["n2"], streams), 180, "n2 settled")
    code, out, err = cli("deadletters", "--json", **servers)
    assert code == 0, err
    letters = [json.loads(line) for line in out.splitlines()]
    written = read_sessions(kafka_bootstrap, app, deduplicate=False)  # at-least-once: copies
    result = verify_sessions(written, expected_sessions(fragments, WebSessions()), len(fragments))
    stamps = [
        item.timestamp_ms
        for records in read_topics(kafka_bootstrap, streams).values()
        for r in records
        if isinstance(item := decode_record(r.key, r.value, r.headers, r.timestamp), Watermark)
    ]
    print(f"\nbroken clock at {stream}@{offset}: {result.line()}; dead letters {letters}")
    assert result.exact, result.line()
    assert len(letters) == 1, letters  # refuted once, by the node that replayed it
    (letter,) = letters
    assert (letter["stream"], letter["offset"]) == (stream, offset), letter
    assert letter["reason"] == "future" and letter["error"].startswith("future:"), letter
    assert letter["timestamp_ms"] == broken.timestamp_ms and letter["key"] == broken.key
    clock = max(f.timestamp_ms for f in fragments)
    assert stamps and max(stamps) == clock  # the producer's clock never took the jump


def _committed_past(status: dict[str, Any], stream: str, offset: int) -> bool:
    """Whether `stream`'s committed read position in ZooKeeper is past `offset`."""
    (row,) = [r for r in status["streams"] if r["name"] == stream]
    return row["committed_offset"] is not None and row["committed_offset"] > offset


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_a_log_line_dated_2100_is_rejected_and_the_rest_is_produced(
    zk_hosts: str, kafka_bootstrap: str, app: str, tmp_path: Path, client: str
) -> None:
    # Kafka 4 brokers refuse a record dated more than an hour ahead of their clock, and every
    # record of its batch with it: the producer rejects that line before sending it, as it
    # rejects a line that does not parse.  Without the bound, the flush fails saying why.
    provision_streams(ConnectionConfig(zk_hosts, kafka_bootstrap, app), STREAMS)
    lines = (DATA / "apache_logs").read_text().splitlines(keepends=True)[:2000]
    lines[1000] = lines[1000].replace("/2015:", "/2100:", 1)
    log = tmp_path / "access.log"
    log.write_text("".join(lines))
    servers = {"zk": zk_hosts, "bootstrap": kafka_bootstrap, "app": app}
    produce = ("produce", str(log), "--format", "apache", "--kafka-client", client, "--json")
    stats = cli_json(*produce, **servers)
    assert stats == {"read": 2000, "parsed": 1999, "rejected": 1, "sent": 1999,
                     "reasons": {"dated-ahead": 1}}  # fmt: skip
    records = read_topics(kafka_bootstrap, streams_of(app, STREAMS))
    stamps = [r.timestamp for rs in records.values() for r in rs if r.key is not None]
    assert len(stamps) == 1999 and max(stamps) < YEAR_2100

    code, _out, err = cli(*produce, "--max-ahead", "none", **servers)
    assert code != 0
    (last,) = err.strip().splitlines()[-1:]
    assert "message.timestamp.after.max.ms" in last and "--max-ahead" in last, last


@pytest.mark.parametrize(
    ("limit_s", "ahead_s", "taken"),
    [(600, 1_800, False), (86_400, 7_200, True)],
    ids=["topics-take-10-min", "topics-take-a-day"],
)
def test_the_bound_by_default_is_the_one_the_stream_topics_apply(
    zk_hosts: str, kafka_bootstrap: str, app: str, tmp_path: Path, limit_s: int, ahead_s: int,
    taken: bool,
) -> None:  # fmt: skip
    # Topics set to take 10 minutes ahead (Kafka 4's default is an hour) would refuse a line
    # dated 30 minutes ahead, and its batch with it; topics set to take a day keep a line
    # dated 2 hours ahead (a log written in local time, read as UTC), which an hour rejects.
    servers = {"zk": zk_hosts, "bootstrap": kafka_bootstrap, "app": app}
    cli_json("streams", "create", "--count", "2", **servers)
    streams = streams_of(app, 2)
    admin = admin_client(kafka_bootstrap)
    try:
        setting = {"message.timestamp.after.max.ms": str(limit_s * 1000)}
        admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, t, configs=setting) for t in streams]
        )
    finally:
        admin.close()
    now_ms = int(time.time() * 1000)
    lines = [json.dumps({"key": f"k{i % 7}", "ts": now_ms - 60_000 + i}) for i in range(200)]
    lines[100] = json.dumps({"key": "k1", "ts": now_ms + ahead_s * 1000})
    log = tmp_path / "visits.jsonl"
    log.write_text("\n".join(lines) + "\n")
    stats = cli_json("produce", str(log), "--format", "jsonl", "--json", **servers)
    if taken:
        assert stats == {"read": 200, "parsed": 200, "rejected": 0, "sent": 200, "reasons": {}}
    else:
        assert stats == {"read": 200, "parsed": 199, "rejected": 1, "sent": 199,
                         "reasons": {"dated-ahead": 1}}  # fmt: skip
    records = read_topics(kafka_bootstrap, streams)
    assert sum(r.key is not None for rs in records.values() for r in rs) == stats["sent"]


@pytest.mark.parametrize("live", [True, False], ids=["lines-keep-coming", "quiet"])
def test_an_endless_input_stops_at_a_refused_record_without_waiting_for_its_end(
    zk_hosts: str, kafka_bootstrap: str, app: str, tmp_path: Path, live: bool
) -> None:
    # `tail -f access.log | sessionizer produce -` never reaches a flush: a record the broker
    # refused (here one dated 2100, let through by --max-ahead none) must still stop it, with
    # the reason, while its input stays open: whether more lines keep coming or none does.
    provision_streams(ConnectionConfig(zk_hosts, kafka_bootstrap, app), STREAMS)
    lines = (DATA / "apache_logs").read_text().splitlines(keepends=True)
    bad = lines[0].replace("/2015:", "/2100:", 1)
    command = [
        str(Path(sys.executable).with_name("sessionizer")), "produce", "-", "--format", "apache",
        "--max-ahead", "none", "--zk", zk_hosts, "--bootstrap", kafka_bootstrap, "--app", app,
    ]  # fmt: skip
    errors = tmp_path / "produce.err"
    with errors.open("w") as err:
        process = subprocess.Popen(command, stdin=subprocess.PIPE, stderr=err, text=True)
    try:
        assert process.stdin is not None
        process.stdin.write(bad)
        process.stdin.flush()
        fed = 0

        def stopped() -> bool:
            nonlocal fed
            if process.poll() is not None:
                return True
            if not live:
                return False
            try:  # a live log: more lines keep coming, the input never ends
                assert process.stdin is not None
                process.stdin.write("".join(lines[fed % 9000 : fed % 9000 + 100]))
                process.stdin.flush()
            except BrokenPipeError:
                return process.poll() is not None
            fed += 100
            return False

        wait_for(stopped, 120, "the producer stopped at the refused record")
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
        if process.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                process.stdin.close()
    last = errors.read_text().strip().splitlines()[-1]
    assert process.returncode != 0 and "message.timestamp.after.max.ms" in last, last
