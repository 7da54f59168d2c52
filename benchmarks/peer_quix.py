"""Peer: Quix Streams (from PyPI) doing WebSessions' sessionization with `session_window`.

    .venv/bin/python -m benchmarks.peer_quix --bootstrap B --app APP --streams N
        --out-topic T --work-dir DIR --result FILE --fragments F [--interval 1]

One `Application` (consumer group of its own, `auto_offset_reset="earliest"`,
state in DIR, changelog topics on, commit every INTERVAL seconds) with one
`StreamingDataFrame` per stream topic, as Quix's docs build them: a msgpack
value deserializer, a `filter` that drops watermark records, `apply` to the
request's bytes and page flag, then `session_window(30 min, grace 2 min)` with
`Count` and `Sum` aggregations, `.final(closing_strategy="partition")` (so a
visitor who never comes back still has their session closed when the stream's
time moves on), and `to_topic`.  Quix Streams 3.28 has a native session window,
so no hand-written State function is needed.

Quix has no notion of end of input: a session is emitted once the stream's
time passes its last event + 2 x gap + grace, so the sessions of the last hour
or so of each stream stay open in the state store when the input ends.  The
run stops after `--idle` seconds without a new message (`Application.run(
timeout=...)`); the measured time is from the first to the last message
processed (`on_message_processed`).
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

import msgpack
from quixstreams import Application
from quixstreams.dataframe.windows import aggregations as agg
from quixstreams.models.serializers import Deserializer

from benchmarks.measure import dir_bytes, tree_io
from benchmarks.peer_common import (
    GAP_MS,
    GRACE_MS,
    Marks,
    fragment_fields,
    is_watermark,
    parse_args,
    progress_path,
    write_result,
)

__all__ = ["main"]

IDLE_SECONDS = 5.0


class MsgpackDeserializer(Deserializer):
    """The router's record values are msgpack maps."""

    def __call__(self, value: bytes, ctx: Any) -> Any:
        return msgpack.unpackb(value, raw=False)


def _request(value: dict[str, Any]) -> dict[str, int]:
    size, page = fragment_fields(value)
    return {"bytes": size, "page": page}


def _fragment(value: Any, key: Any, timestamp: int, headers: Any) -> bool:
    return not is_watermark(None if key is None else b"", headers)


def _session(value: dict[str, Any], key: Any, timestamp: int, headers: Any) -> dict[str, Any]:
    return {
        "key": key,
        "first_ts": value["start"],
        "last_ts": value["end"] - 1,  # Quix's session end is exclusive
        "fragments": value["fragments"],
        "bytes": value["bytes"],
        "pages": value["pages"],
    }


def main(argv: list[str] | None = None) -> None:
    """Run until the input is idle; write the result file."""
    args = parse_args(__doc__.split("\n\n")[0], argv)
    marks = Marks(progress_path(args.work_dir))
    state_dir = args.work_dir / "state"
    group = f"bench-quix-{args.app}-{uuid.uuid4().hex[:6]}"
    app = Application(
        broker_address=args.bootstrap,
        consumer_group=group,
        auto_offset_reset="earliest",
        commit_interval=args.interval,
        state_dir=state_dir,
        loglevel="WARNING",
        on_message_processed=lambda topic, partition, offset: marks.seen(),
    )
    output = app.topic(args.out_topic, key_serializer="str", value_serializer="json")
    for name in args.topics:
        topic = app.topic(name, key_deserializer="str", value_deserializer=MsgpackDeserializer())
        sdf = app.dataframe(topic)
        sdf = sdf.filter(_fragment, metadata=True)
        sdf = sdf.apply(_request)
        sdf = sdf.session_window(inactivity_gap_ms=GAP_MS, grace_ms=GRACE_MS).agg(
            fragments=agg.Count(), bytes=agg.Sum("bytes"), pages=agg.Sum("page")
        )
        sdf = sdf.final(closing_strategy="partition")
        sdf = sdf.apply(_session, metadata=True)
        sdf.to_topic(output)
    started = time.time()
    app.run(timeout=IDLE_SECONDS, collect=False)
    finished = time.time()
    write_result(
        args.result,
        first_record_at=marks.first,
        last_record_at=marks.last,
        finished_at=finished,
        started_at=started,
        records_seen=marks.records,
        consumer_group=group,
        changelog_prefix=f"changelog__{group}",
        state_what="changelog topics (Kafka) + local RocksDB (final size)",
        local_state_bytes=dir_bytes(state_dir),
        disk_written=tree_io(os.getpid()),
        idle_seconds=IDLE_SECONDS,
    )


if __name__ == "__main__":
    main()
