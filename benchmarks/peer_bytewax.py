"""Peer: Bytewax (from PyPI) doing WebSessions' sessionization with `SessionWindower`.

    .venv/bin/python -m benchmarks.peer_bytewax --bootstrap B --app APP --streams N
        --out-topic T --work-dir DIR --result FILE --fragments F [--interval 1]

The dataflow, as Bytewax's own docs build one: `KafkaSource` (tail=False, so
it ends at the partitions' end), `filter_map` to drop watermark records and
decode the msgpack value, `fold_window` with an `EventClock` (the record
timestamp; wait 2 minutes for late records) and `SessionWindower(gap=30 min)`,
and `KafkaSink` for the sessions.  One worker in one process, run with
recovery on, as `python -m bytewax.run -r DIR -s INTERVAL -b 0` would
(`cli_main` with a `RecoveryConfig`): every INTERVAL seconds of processing it
snapshots the changed state into SQLite files in DIR.  At the end of input
Bytewax closes every open window (its EOF watermark is the end of time).
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import msgpack
from bytewax import operators as op
from bytewax.connectors.kafka import KafkaSink, KafkaSinkMessage, KafkaSource
from bytewax.dataflow import Dataflow
from bytewax.operators import windowing as win
from bytewax.recovery import RecoveryConfig, init_db_dir
from bytewax.run import cli_main
from confluent_kafka import OFFSET_BEGINNING

from benchmarks.measure import dir_bytes, tree_io
from benchmarks.peer_common import (
    GAP_MS,
    GRACE_MS,
    Marks,
    fragment_fields,
    is_watermark,
    parse_args,
    progress_path,
    session_value,
    write_result,
)

__all__ = ["build_flow", "main"]

# [first_ts, last_ts, fragments, bytes, pages]
Session = list[int]
Value = tuple[int, int, int]  # (event time ms, bytes, page)


def _new() -> Session:
    return [0, 0, 0, 0, 0]


def _fold(session: Session, value: Value) -> Session:
    ts, size, page = value
    if session[2] == 0:
        session[0] = session[1] = ts
    else:
        session[0] = min(session[0], ts)
        session[1] = max(session[1], ts)
    session[2] += 1
    session[3] += size
    session[4] += page
    return session


def _merge(a: Session, b: Session) -> Session:
    if a[2] == 0:
        return b
    if b[2] == 0:
        return a
    return [min(a[0], b[0]), max(a[1], b[1]), a[2] + b[2], a[3] + b[3], a[4] + b[4]]


def _event_time(value: Value) -> datetime:
    return datetime.fromtimestamp(value[0] / 1000, UTC)


def build_flow(bootstrap: str, topics: list[str], out_topic: str, marks: Marks) -> Dataflow:
    """The sessionization dataflow."""

    def fragment(message: Any) -> tuple[str, Value] | None:
        marks.seen()
        if is_watermark(message.key, message.headers):
            return None
        size, page = fragment_fields(msgpack.unpackb(message.value, raw=False))
        return message.key.decode(), (message.timestamp[1], size, page)

    def encode(item: tuple[str, tuple[int, Session]]) -> KafkaSinkMessage[bytes, bytes]:
        key, (_window, s) = item
        return KafkaSinkMessage(key.encode(), session_value(key, *s))

    flow = Dataflow("web_sessions")
    source = KafkaSource([bootstrap], topics, tail=False, starting_offset=OFFSET_BEGINNING)
    messages = op.input("kafka_in", flow, source)
    fragments = op.filter_map("fragments", messages, fragment)
    clock = win.EventClock(_event_time, wait_for_system_duration=timedelta(milliseconds=GRACE_MS))
    windower = win.SessionWindower(gap=timedelta(milliseconds=GAP_MS))
    sessions = win.fold_window("sessions", fragments, clock, windower, _new, _fold, _merge)
    encoded = op.map("encode", sessions.down, encode)
    op.output("kafka_out", encoded, KafkaSink([bootstrap], out_topic))
    # Records Bytewax deems late leave the window: counted, so a mismatch can be explained.
    op.inspect("late", sessions.late, lambda _step, _item: marks.late())
    return flow


def main(argv: list[str] | None = None) -> None:
    """Run the dataflow to the end of its input; write the result file."""
    args = parse_args(__doc__.split("\n\n")[0], argv)
    recovery = args.work_dir / "recovery"
    recovery.mkdir(parents=True, exist_ok=True)
    init_db_dir(recovery, 1)
    marks = Marks(progress_path(args.work_dir))
    flow = build_flow(args.bootstrap, args.topics, args.out_topic, marks)
    started = time.time()
    cli_main(
        flow,
        workers_per_process=1,
        epoch_interval=timedelta(seconds=args.interval),
        recovery_config=RecoveryConfig(recovery, timedelta(0)),
    )
    finished = time.time()
    write_result(
        args.result,
        first_record_at=marks.first,
        finished_at=finished,
        started_at=started,
        records_seen=marks.records,
        late_records=marks.late_records,
        state_what="SQLite recovery partitions (final size)",
        state_bytes=dir_bytes(recovery),
        disk_written=tree_io(os.getpid()),
    )


if __name__ == "__main__":
    main()
