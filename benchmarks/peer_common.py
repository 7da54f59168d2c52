"""What the peer programs (`benchmarks.peer_*`) share: their command line and their result file.

Every peer is one process started by `benchmarks.peers`, reads the same
`<app>.stream.NNNN` topics from the beginning, sessionizes WebSessions' way
(key = the record key `"<ip>|<agent>"`, event time = the record timestamp,
30-minute inactivity gap, 2 minutes for late records), skips the producer's
watermark records (no key, header `sessionizer-kind: watermark`), and writes
each session as one JSON record to `--out-topic`:
`{"key", "first_ts", "last_ts", "fragments", "bytes", "pages"}` (times in epoch
ms; `pages` counts successful non-asset requests, as WebSessions does).
It then writes `--result`, a JSON file with its timings and what it stored for
recovery.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from router.naming import stream_name
from router.wire import KIND_HEADER
from sessionizer.examples.weblog import is_page

__all__ = [
    "GAP_MS",
    "GRACE_MS",
    "KIND_HEADER",
    "Marks",
    "fragment_fields",
    "is_watermark",
    "parse_args",
    "progress_path",
    "read_progress",
    "session_value",
    "write_result",
]

GAP_MS = 30 * 60 * 1000
GRACE_MS = 2 * 60 * 1000


def parse_args(description: str, argv: list[str] | None = None) -> argparse.Namespace:
    """The command line every peer takes."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--app", required=True, help="whose <app>.stream.NNNN topics to read")
    parser.add_argument("--streams", type=int, required=True)
    parser.add_argument("--out-topic", required=True)
    parser.add_argument("--work-dir", type=Path, required=True, help="state/checkpoint dir")
    parser.add_argument("--result", type=Path, required=True)
    parser.add_argument(
        "--interval",
        type=float,
        default=1.0,
        help="seconds between state snapshots/commits (ours: 1 s)",
    )
    parser.add_argument("--fragments", type=int, required=True, help="how many to expect")
    args = parser.parse_args(argv)
    args.topics = [stream_name(args.app, i) for i in range(args.streams)]
    return args


def progress_path(work_dir: Path) -> Path:
    """Where a peer's Marks write their progress inside its work dir."""
    return work_dir / "progress.json"


def is_watermark(key: bytes | None, headers: Any) -> bool:
    """The producer's watermark records carry no key and a `sessionizer-kind` header."""
    if key is None:
        return True
    return any(k == KIND_HEADER for k, _ in headers or ())


def fragment_fields(fields: dict[str, Any]) -> tuple[int, int]:
    """(bytes, page) of one request, as WebSessions counts them."""
    page = 1 if fields["status"] < 400 and is_page(fields["path"]) else 0
    return int(fields["bytes"]), page


def session_value(
    key: str, first_ts: int, last_ts: int, fragments: int, size: int, pages: int
) -> bytes:
    """The JSON record of one session."""
    return json.dumps(
        {
            "key": key,
            "first_ts": first_ts,
            "last_ts": last_ts,
            "fragments": fragments,
            "bytes": size,
            "pages": pages,
        },
        separators=(",", ":"),
    ).encode()


PROGRESS_EVERY = 50_000


class Marks:
    """Wall times of the first and last input record the peer handled.

    With a `progress` path, every PROGRESS_EVERY records it also rewrites that
    file (`{"records", "first", "last"}`), so a peer stopped at its time budget
    still tells how far it got and how fast.
    """

    def __init__(self, progress: Path | None = None) -> None:
        self.first: float | None = None
        self.last: float | None = None
        self.records = 0
        self.late_records = 0
        self._progress = progress

    def seen(self) -> None:
        """Call once per input record (cheap)."""
        now = time.time()
        if self.first is None:
            self.first = now
        self.last = now
        self.records += 1
        if self._progress is not None and self.records % PROGRESS_EVERY == 0:
            state = {"records": self.records, "first": self.first, "last": now}
            self._progress.write_text(json.dumps(state))
            print(f"progress: {self.records:,} records", flush=True)

    def late(self) -> None:
        """Call once per input record the system set aside as late."""
        self.late_records += 1


def read_progress(path: Path) -> dict[str, Any] | None:
    """What a peer's Marks last wrote to `path`, or None if it wrote nothing."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def write_result(path: Path, **values: Any) -> None:
    """The result file, plus this process's own CPU seconds."""
    from benchmarks.measure import tree_cpu

    values.setdefault("cpu_s", tree_cpu(os.getpid()))
    path.write_text(json.dumps(values, indent=2) + "\n")
