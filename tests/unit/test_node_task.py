"""`StreamTask`: one stream's records through decode and engine, without Kafka."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from framework.kernel.records import StreamRecord
from framework.kernel.watermark import Watermark
from framework.node.task import StreamTask
from router.fragment import ParsedFragment
from router.wire import encode_fragment, encode_watermark
from sessionizer.processor import StreamProcessor
from sessionizer.records import FinishedSession
from sessionizer.sinks import DeadLetter
from state.record import StreamState

STREAM = "t.stream.0000"
MINUTE = 60_000


class Pages(StreamProcessor):
    """Counts fragments; raises on the path /boom."""

    timeout = 10 * 60
    grace = 60

    def open(self, key: str, fragment: Mapping[str, Any]) -> dict[str, int]:
        return {"pages": 0}

    def update(self, session: dict[str, int], fragment: Mapping[str, Any]) -> None:
        if fragment.get("path") == "/boom":
            raise RuntimeError("boom")
        session["pages"] += 1

    def close(self, key: str, session: dict[str, int]) -> dict[str, int]:
        return session


def fragment(offset: int, key: str, minute: int, path: str = "/") -> StreamRecord:
    raw_key, value = encode_fragment(ParsedFragment(key, minute * MINUTE, {"path": path}))
    return StreamRecord(STREAM, offset, raw_key, value, minute * MINUTE, [])


def watermark(offset: int, minute: int, end: bool = False) -> StreamRecord:
    value, headers = encode_watermark(Watermark(minute * MINUTE, end))
    return StreamRecord(STREAM, offset, None, value, minute * MINUTE, headers)


def run(task: StreamTask, records: list[StreamRecord]) -> list:
    return [out for record in records for out in task.handle(record)]


def test_sessions_come_out_and_the_position_follows_the_records() -> None:
    task = StreamTask.resume(Pages(), StreamState.initial(STREAM))
    out = run(task, [fragment(0, "a", 0), fragment(1, "a", 5), watermark(2, 60, end=True)])
    assert [(s.key, s.fragments, s.result) for s in out] == [("a", 2, {"pages": 2})]
    assert isinstance(out[0], FinishedSession) and task.position == 3


def test_bad_records_late_fragments_and_failing_hooks_become_dead_letters() -> None:
    task = StreamTask.resume(Pages(), StreamState.initial(STREAM))
    garbage = StreamRecord(STREAM, 1, b"k", b"\xc1", 0, [])
    out = run(task, [fragment(0, "a", 30), garbage, fragment(2, "b", 0),
                     fragment(3, "c", 31, "/boom"), watermark(4, 99, end=True)])  # fmt: skip
    letters = [o for o in out if isinstance(o, DeadLetter)]
    assert sorted(letter.reason for letter in letters) == ["hook:update", "late", "not-msgpack"]
    assert next(o for o in letters if o.reason == "not-msgpack").value == b"\xc1"
    assert [s.key for s in out if isinstance(s, FinishedSession)] == ["a"]
    assert task.dead_letters == 3 and task.position == 5


def test_a_resumed_task_replays_without_committing_until_past_the_old_position() -> None:
    first = StreamTask.resume(Pages(), StreamState.initial(STREAM))
    records = [fragment(0, "a", 0), fragment(1, "b", 1), fragment(2, "a", 2)]
    run(first, records)
    stored = StreamState.decode(first.snapshot().encode(), stream=STREAM)
    assert (stored.safe_offset, stored.committed_offset) == (0, 3)

    second = StreamTask.resume(Pages(), stored)
    assert second.position == 0 and second.replaying
    run(second, records[:2])
    assert second.replaying  # still behind the previous owner's position
    run(second, records[2:])
    assert not second.replaying
    out = run(second, [watermark(3, 60, end=True)])
    assert sorted((s.key, s.fragments) for s in out) == [("a", 2), ("b", 1)]


def test_a_replay_writes_no_dead_letter_the_commit_it_resumes_from_already_holds() -> None:
    """Committed at every position in turn, then resumed: each dead letter comes out once.

    Chaos found committed dead letters twice and three times with exactly-once: a
    replay re-read records the previous owner had read before its commit and
    dead-lettered them again. A session whose hook fails later (d) dead-letters its
    already-folded fragment at the failure, which may lie past the commit.
    """
    garbage = StreamRecord(STREAM, 1, b"k", b"\xc1", 0, [])
    records = [fragment(0, "a", 30), garbage, fragment(2, "b", 0), fragment(3, "c", 31, "/boom"),
               fragment(4, "d", 32), fragment(5, "a", 33), fragment(6, "d", 34, "/boom"),
               watermark(7, 99, end=True)]  # fmt: skip

    def letters(outputs: list) -> list[tuple[str, int]]:
        return sorted((o.reason, o.offset) for o in outputs if isinstance(o, DeadLetter))

    whole = letters(run(StreamTask.resume(Pages(), StreamState.initial(STREAM)), records))
    assert whole == [("hook:update", 3), ("hook:update", 4), ("hook:update", 6), ("late", 2),
                     ("not-msgpack", 1)]  # fmt: skip
    for cut in range(len(records) + 1):
        first = StreamTask.resume(Pages(), StreamState.initial(STREAM))
        before = run(first, records[:cut])
        stored = StreamState.decode(first.snapshot().encode(), stream=STREAM)
        second = StreamTask.resume(Pages(), stored)
        after = run(second, records[second.position :])
        assert letters(before + after) == whole, f"committed at {cut}"
        assert first.dead_letters + second.dead_letters == len(whole)
