"""Read finished sessions back from `<app>.sessions` (for `sessions`, the demo and tests)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from router.naming import sessions_topic
from router.readback import read_topics

__all__ = ["COMMITTED", "read_sessions"]

COMMITTED = "read_committed"
"""The isolation level every reader of `<app>.sessions` uses (docs/delivery.md)."""


def read_sessions(
    bootstrap: str,
    app: str,
    *,
    deduplicate: bool = True,
    properties: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Every session written so far, in topic order; one per `session_id` unless told not to.

    With `deduplicate`, the first copy of each id is kept: replays write the same
    content under the same id, so which copy is kept does not matter.  Read
    `read_committed` whatever the delivery mode: the records of an exactly-once
    node's aborted transactions are in the log but are not output.
    """
    topic = sessions_topic(app)
    records = read_topics(bootstrap, [topic], properties=properties, isolation_level=COMMITTED)
    sessions = [json.loads(r.value) for r in records[topic]]
    if not deduplicate:
        return sessions
    unique: dict[str, dict[str, Any]] = {}
    for session in sessions:
        unique.setdefault(session["session_id"], session)
    return list(unique.values())
