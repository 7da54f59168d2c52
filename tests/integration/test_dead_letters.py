"""Issue 20, item 8: dead letters you can see, read and replay.

Real ZooKeeper and Kafka, a node as a process, the real Apache log. A processor
whose `update` raises for some visitors turns their sessions into dead letters:
the node's log must show the first failure of each stream with its traceback,
`sessionizer deadletters` must list exactly the fragments of the failed sessions,
and `deadletters replay` with the fixed processor must write exactly the
missing sessions, so the whole output equals a clean run's, with no differing
duplicate (and a second replay writes nothing).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from framework.kernel.config import ConnectionConfig
from framework.kernel.watermark import Watermark
from framework.kernel.zookeeper import zookeeper_client
from framework.provision import provision_streams
from framework.sessions import read_sessions
from framework.testing.cli import DATA, cli, cli_json
from framework.testing.members import wait_for
from framework.testing.nodes import NodeGroup, settled_alive, streams_of
from framework.testing.processors import raising_key
from router.formats import parse_file
from router.ingest import produce_fragments
from router.producer import ProducerConfig, StreamProducer
from router.readback import read_topics
from router.wire import decode_record
from sessionizer.engine import SessionEngine
from sessionizer.examples.weblog import WebSessions
from sessionizer.processor import Timing
from sessionizer.records import FinishedSession, Fragment
from sessionizer.reference import batch_sessions
from sessionizer.sinks import encode_session

pytestmark = pytest.mark.integration
STREAMS = 4
FIXED = "sessionizer.examples.weblog:WebSessions"


def _stream_records(bootstrap: str, app: str) -> dict[str, list[Any]]:
    return read_topics(bootstrap, streams_of(app, STREAMS))


def _clean_run(records: dict[str, list[Any]]) -> dict[str, dict[str, Any]]:
    """Every session a node with the fixed processor writes, as JSON, by session id."""
    sessions: dict[str, dict[str, Any]] = {}
    for stream, stream_records in records.items():
        engine = SessionEngine(stream, WebSessions())
        for r in stream_records:
            item = decode_record(r.key, r.value, r.headers, r.timestamp, offset=r.offset)
            if isinstance(item, Watermark):
                outputs = engine.process(item)
            else:
                outputs = engine.process(
                    Fragment(r.offset, item.key, item.timestamp_ms, item.fields)
                )
            for out in outputs:
                assert isinstance(out, FinishedSession), out  # the clean run loses nothing
                sessions[out.session_id] = json.loads(encode_session(out))
    return sessions


def _failed_fragments(records: dict[str, list[Any]]) -> set[tuple[str, int]]:
    """(stream, offset) of every fragment of a session of a failing visitor."""
    timing = Timing.of(WebSessions())
    failed = set()
    for stream, stream_records in records.items():
        fragments = []
        for r in stream_records:
            item = decode_record(r.key, r.value, r.headers, r.timestamp, offset=r.offset)
            if not isinstance(item, Watermark):
                fragments.append(Fragment(r.offset, item.key, item.timestamp_ms, item.fields))
        for session in batch_sessions(
            fragments,
            timing.timeout_ms,
            WebSessions().is_end,
            max_duration_ms=timing.max_duration_ms,
        ):
            if raising_key(session.key):
                failed.update((stream, offset) for offset in session.offsets)
    return failed


def test_failed_sessions_are_logged_listed_and_replayed_exactly(
    zk_hosts: str, kafka_bootstrap: str, app: str, tmp_path: Path
) -> None:
    connection = ConnectionConfig(zk_hosts, kafka_bootstrap, app)
    provision_streams(connection, STREAMS)
    fragments = parse_file(DATA / "apache_logs", "apache")
    with StreamProducer(ProducerConfig(kafka_bootstrap, app, STREAMS)) as producer:
        produce_fragments(producer, fragments, end_of_input=True)
    records = _stream_records(kafka_bootstrap, app)
    failed = _failed_fragments(records)
    assert 100 < len(failed) < len(fragments) // 2, len(failed)

    processor = "framework.testing.processors:RaisingWebSessions"
    with NodeGroup(connection, tmp_path, processor) as group, zookeeper_client(zk_hosts) as zk:
        node = group.start("n1")
        wait_for(
            lambda: settled_alive(zk, connection, group, ["n1"], streams_of(app, STREAMS)),
            180,
            "the node caught up",
        )
        # The first failure of each stream, at once, with the traceback of the hook.
        first = wait_for(lambda: node.events("hook_failed") or None, 30, "hook_failed in the log")
    streams_failing = {stream for stream, _ in failed}
    assert {e["stream"] for e in first} == streams_failing
    assert len(first) == len(streams_failing)  # once per stream, then summaries
    for event in first:
        assert "RuntimeError: deliberate failure for this visitor" in event["traceback"]
        assert "processors.py" in event["traceback"] and "in update" in event["traceback"]

    code, out, err = cli("deadletters", "--json", zk=zk_hosts, bootstrap=kafka_bootstrap, app=app)
    assert code == 0, err
    listed = [json.loads(line) for line in out.splitlines()]
    assert {(d["stream"], d["offset"]) for d in listed} == failed
    assert len(listed) == len(failed)  # no other dead letter: the default grace covers the log
    assert all(d["reason"] == "hook:update" and d["exception"] == "RuntimeError" for d in listed)
    code, out, _ = cli("deadletters", "show", str(listed[0]["position"]),
                       zk=zk_hosts, bootstrap=kafka_bootstrap, app=app)  # fmt: skip
    assert code == 0 and "in update" in out and "deliberate failure" in out

    status = cli_json("status", "--json", zk=zk_hosts, bootstrap=kafka_bootstrap, app=app)
    per_stream = {row["name"]: row["dead_letters"] for row in status["streams"]}
    assert per_stream == {s: sum(1 for f, _ in failed if f == s) for s in streams_of(app, STREAMS)}

    clean = _clean_run(records)
    before = {s["session_id"] for s in read_sessions(kafka_bootstrap, app)}
    missing = set(clean) - before
    assert missing and before <= set(clean)

    summary = cli_json("deadletters", "replay", "--processor", FIXED, "--json",
                       zk=zk_hosts, bootstrap=kafka_bootstrap, app=app)  # fmt: skip
    assert summary["replayed"] == len(missing) and summary["failed"] == {}, summary
    written = read_sessions(kafka_bootstrap, app, deduplicate=False)
    by_id: dict[str, dict[str, Any]] = {}
    for session in written:
        assert by_id.setdefault(session["session_id"], session) == session  # no differing copy
    assert by_id == clean

    again = cli_json("deadletters", "replay", "--processor", FIXED, "--json",
                     zk=zk_hosts, bootstrap=kafka_bootstrap, app=app)  # fmt: skip
    assert again["replayed"] == 0 and again["already_emitted"] == len(missing), again
    assert len(read_sessions(kafka_bootstrap, app, deduplicate=False)) == len(written)
