"""`streams reset` keeps the stream's live producers (`framework.reset_producers`).

With producers a and b live at offset N, a state written by a reset at N must
name both: else the next owner takes a's END for the end of the whole input,
and the sessions after N differ from a run that kept the producers.
"""

from __future__ import annotations

from typing import Any

from framework import StreamProcessor
from framework.kernel.watermark import JOINED, LEFT, Watermark
from framework.reset_producers import RebuiltProducers, apply_records
from router.fragment import ParsedFragment
from router.wire import encode_fragment, encode_watermark
from sessionizer import EngineOutput, Fragment, Record, SessionEngine
from state.record import StreamState

STREAM = "app.stream.0002"


class Visits(StreamProcessor[dict[str, Any]]):
    timeout = 60
    grace = 0
    max_producer_skew = 30

    def open(self, key: str, fragment: Any) -> dict[str, Any]:
        return {"n": 0}

    def update(self, session: dict[str, Any], fragment: Any) -> None:
        session["n"] += 1

    def close(self, key: str, session: dict[str, Any]) -> dict[str, Any]:
        return dict(session)


def _log() -> list[Record]:
    """a and b join and write; N = 6 is after b's last watermark; then a ends, b goes on."""
    return [
        Watermark(0, offset=0, producer="a", marker=JOINED),
        Watermark(0, offset=1, producer="b", marker=JOINED),
        Watermark(10_000, offset=2, producer="a"),
        Watermark(10_000, offset=3, producer="b"),
        Watermark(20_000, offset=4, producer="a"),
        Watermark(15_000, offset=5, producer="b"),
        Fragment(6, "k", 21_000, {"n": 1}),  # N = 6
        Watermark(25_000, end=True, offset=7, producer="a"),
        Fragment(8, "k", 26_000, {"n": 2}),
        Watermark(30_000, offset=9, producer="b"),
        Watermark(200_000, end=True, offset=10, producer="b"),
    ]


def _wire(records: list[Record]) -> list[tuple[int, Any, Any, Any, int]]:
    """The records as a Kafka consumer returns them (offset, key, value, headers, timestamp)."""
    out: list[tuple[int, Any, Any, Any, int]] = []
    for record in records:
        assert record.offset is not None
        if isinstance(record, Watermark):
            value, headers = encode_watermark(record)
            out.append((record.offset, None, value, headers, record.timestamp_ms))
        else:
            parsed = ParsedFragment(record.key, record.timestamp_ms, record.value)
            key, value = encode_fragment(parsed)
            out.append((record.offset, key, value, [], record.timestamp_ms))
    return out


def _run(engine: SessionEngine, records: list[Record]) -> list[EngineOutput]:
    return [output for record in records for output in engine.process(record)]


def test_the_producers_rebuilt_from_the_log_are_the_engines_at_that_offset() -> None:
    records = _log()
    engine = SessionEngine(STREAM, Visits())
    _run(engine, records[:6])
    rebuilt = apply_records((), _wire(records[:6]), 6)
    assert rebuilt == engine.snapshot(6).producers == (("a", 20_000), ("b", 15_000))


def test_a_reset_that_keeps_the_producers_gives_the_uninterrupted_output() -> None:
    records = _log()
    whole = _run(SessionEngine(STREAM, Visits()), records)
    kept = StreamState(
        STREAM, safe_offset=6, committed_offset=6, producers=apply_records((), _wire(records), 6)
    )
    assert _run(SessionEngine(STREAM, Visits(), resume=kept), records[6:]) == whole
    # Without them (what a reset wrote before): a's END ended the input, a session early.
    forgot = StreamState(STREAM, safe_offset=6, committed_offset=6)
    assert _run(SessionEngine(STREAM, Visits(), resume=forgot), records[6:]) != whole


def test_left_and_end_markers_and_the_state_records_producers_are_applied() -> None:
    start = (("a", 5), ("b", None), ("c", 7))
    later = [
        Watermark(9, offset=20, producer="c", marker=LEFT),
        Watermark(8, offset=21, producer="b"),
        Watermark(9, end=True, offset=22, producer="a"),
        Watermark(3, offset=23, producer="d", marker=JOINED),
        Watermark(4, offset=24, producer="x"),  # never joined: moves nothing
    ]
    wire = [*_wire(later), (25, b"k", b"\xc1 not msgpack", [], 10)]  # undecodable: skipped
    assert apply_records(start, wire, 26) == (("b", 8), ("d", 3))
    assert apply_records(start, [], 26) == start


def test_the_reset_says_what_it_kept_and_where_it_read_from() -> None:
    rebuilt = RebuiltProducers((("a", 20_000), ("b", None)), 3, 40, True)
    assert rebuilt.to_json() == {
        "producers": [["a", 20_000], ["b", None]],
        "producers_from": {"state_record": True, "scanned_from": 3, "records_scanned": 40},
    }
