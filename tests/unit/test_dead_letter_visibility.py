"""Issue 20, item 8: dead letters are seen, carry what went wrong, and `grace` suits real logs.

A processor whose `update()` raised turned a whole run into dead letters with no
warning and the exception text nowhere but a short header; a late record was
re-encoded instead of kept as read; and with the default `grace = 0` most lines
of the real Apache log were late. Checked here with the node's own per-stream
task and output path (`StreamTask`, `Deliveries`) and in-process fakes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgpack
import pytest

from framework import StreamProcessor
from framework.kernel.config import ConnectionConfig
from framework.kernel.records import StreamRecord
from framework.node.config import NodeConfig
from framework.node.deliveries import Deliveries
from framework.node.stats import NodeStats
from framework.node.task import StreamTask
from framework.testing.cli import DATA
from framework.testkit import frag, run
from framework.testkit.engine_runs import DefaultTimings
from router.formats import parse_file
from router.wire import encode_fragment
from sessionizer.engine import SessionEngine
from sessionizer.examples.weblog import WebSessions
from sessionizer.records import Fragment, LateFragment
from sessionizer.sinks import DeadLetter, MemorySink
from state.record import StreamState

T = 1_704_103_200_000  # 2024-01-01T10:00:00Z


class Fragile(StreamProcessor[dict[str, Any]]):
    """Counts fragments; `update` raises for the key "bad"."""

    timeout = 600
    grace = 0

    def open(self, key: str, fragment: Mapping[str, Any]) -> dict[str, Any]:
        return {"n": 0}

    def update(self, session: dict[str, Any], fragment: Mapping[str, Any]) -> None:
        if fragment.get("who") == "bad":
            raise ValueError("cannot count this one")
        session["n"] += 1

    def close(self, key: str, session: dict[str, Any]) -> dict[str, Any]:
        return session


class Recorder:
    """A structlog-like logger that keeps (level, event, fields)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []

    def __getattr__(self, level: str) -> Any:
        def log(event: str, **fields: Any) -> None:
            self.events.append((level, event, fields))

        return log

    def named(self, event: str) -> list[dict[str, Any]]:
        return [fields for _, name, fields in self.events if name == event]


def _record(stream: str, offset: int, key: bytes, value: bytes, ts: int) -> StreamRecord:
    return StreamRecord(stream, offset, key, value, ts, None)


def _fragments(stream: str, items: list[tuple[str, int, dict[str, Any]]]) -> list[StreamRecord]:
    records = []
    for offset, (key, ts, fields) in enumerate(items):
        raw_key, value = encode_fragment(frag(key, ts, **fields))
        records.append(_record(stream, offset, raw_key, value, ts))
    return records


def test_a_hook_failure_carries_its_exception_traceback_and_session_in_headers() -> None:
    inputs = [frag("bad", T, who="bad"), frag("bad", T + 1000, who="bad")]
    letters = run(Fragile(), inputs).dead_letters
    assert [d.reason for d in letters] == ["hook:update", "hook:update"]
    letter = letters[0]
    assert letter.exception == "ValueError"
    assert "in update" in letter.traceback and "cannot count this one" in letter.traceback
    assert letter.session_id is not None and letter.session_key == "bad"
    headers = dict(letter.headers())
    assert headers["sessionizer.errors.exception.class.name"] == b"ValueError"
    assert b"in update" in headers["sessionizer.errors.exception.stacktrace"]
    assert headers["sessionizer.errors.session.id"] == letter.session_id.encode()
    assert headers["reason"] == b"hook:update" and headers["stream"] == letter.stream.encode()
    again = DeadLetter.from_record(letter.key, letter.value, letter.headers())
    assert again == letter and again.traceback == letter.traceback


def test_a_late_fragment_keeps_the_bytes_it_was_read_as() -> None:
    # {"n": 1} with the 1 as a uint64 (0xcf): valid, but not how this encoder writes it.
    odd_value = b"\x81\xa1n\xcf" + (1).to_bytes(8, "big")
    assert msgpack.unpackb(odd_value) == {"n": 1}
    key, value = encode_fragment(frag("k", T, n=1))
    assert value != odd_value
    task = StreamTask.resume(Fragile(), StreamState.initial("app.stream.0000"))
    task.handle(_record("app.stream.0000", 0, key, value, T + 60_000))
    [letter] = task.handle(_record("app.stream.0000", 1, key, odd_value, T))
    assert isinstance(letter, DeadLetter) and letter.reason == "late"
    assert (letter.key, letter.value, letter.timestamp_ms) == (key, odd_value, T)
    assert letter.payload == "original"


def _deliveries(log: Recorder, **settings: Any) -> Deliveries:
    config = NodeConfig(ConnectionConfig("localhost:2181", "localhost:9092"), **settings)
    return Deliveries(MemorySink(), config, NodeStats(), log)


def test_the_first_hook_failure_of_each_stream_is_logged_with_its_traceback() -> None:
    log = Recorder()
    out = _deliveries(log, stats_interval=3600)
    for stream in ("app.stream.0000", "app.stream.0001"):
        task = StreamTask.resume(Fragile(), StreamState.initial(stream))
        records = _fragments(
            stream,
            [("bad", T + n * 1000, {"who": "bad"}) for n in range(5)] + [("x", T + 10**7, {})],
        )
        for record in records:
            out.deliver(task, task.handle(record))
    failures = log.named("hook_failed")
    assert [f["stream"] for f in failures] == ["app.stream.0000", "app.stream.0001"]
    assert all("ValueError: cannot count this one" in f["traceback"] for f in failures)
    assert all("in update" in f["traceback"] and f["key"] == "bad" for f in failures)
    assert [level for level, name, _ in log.events if name == "hook_failed"] == ["error", "error"]


def test_dead_letters_are_summarized_once_per_interval() -> None:
    log = Recorder()
    out = _deliveries(log, stats_interval=1e-9)  # every flush is a new interval
    task = StreamTask.resume(Fragile(), StreamState.initial("app.stream.0000"))
    items = [("bad", T + n * 1000, {"who": "bad"}) for n in range(7)] + [("x", T + 10**7, {})]
    for record in _fragments("app.stream.0000", items):
        out.deliver(task, task.handle(record))
    assert log.named("dead_letters") == []  # not one warning per dead letter
    out.flush([task])
    [summary] = log.named("dead_letters")
    assert summary["stream"] == "app.stream.0000" and summary["reason"] == "hook:update"
    assert summary["count"] == 7 and summary["example_key"] == "bad"
    out.flush([task])
    assert len(log.named("dead_letters")) == 1  # nothing new, nothing said


class NoGrace(WebSessions):
    grace = 0


def test_a_stream_mostly_late_warns_naming_grace() -> None:
    log = Recorder()
    out = _deliveries(log, stats_interval=1e-9)
    task = StreamTask.resume(NoGrace(), StreamState.initial("app.stream.0000"))
    parsed = parse_file(DATA / "apache_logs", "apache")[:1000]
    for offset, fragment in enumerate(parsed):
        key, value = encode_fragment(fragment)
        out.deliver(
            task, task.handle(_record(task.stream, offset, key, value, fragment.timestamp_ms))
        )
    out.flush([task])
    [warning] = log.named("dead_letter_share")
    assert warning["kind"] == "late" and warning["share"] > 0.5
    assert "grace" in warning["note"] and warning["grace_s"] == 0
    out.flush([task])
    assert len(log.named("dead_letter_share")) == 1  # once per stream


def _late(processor: StreamProcessor[Any], name: str, fmt: str) -> int:
    engine = SessionEngine("app.stream.0000", processor)
    late = 0
    for offset, f in enumerate(parse_file(DATA / name, fmt)):
        outputs = engine.process(Fragment(offset, f.key, f.timestamp_ms, f.fields))
        late += sum(isinstance(o, LateFragment) for o in outputs)
    return late


@pytest.mark.parametrize(("name", "fmt"), [("apache_logs", "apache"), ("auth.log", "sshd")])
def test_the_default_grace_takes_the_real_logs_out_of_order_lines(name: str, fmt: str) -> None:
    assert _late(DefaultTimings(), name, fmt) == 0
