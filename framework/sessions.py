"""Read finished sessions back from `<app>.sessions` (for `sessions`, the demo and tests)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from router.naming import sessions_topic
from router.readback import read_topics

__all__ = ["read_sessions"]


def read_sessions(
    bootstrap: str,
    app: str,
    *,
    deduplicate: bool = True,
    properties: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Every session written so far, in topic order; one per `session_id` unless told not to.

    With `deduplicate`, the first copy of each id is kept: replays write the same
    content under the same id, so which copy is kept does not matter.
    """
    topic = sessions_topic(app)
    sessions = [
        json.loads(r.value) for r in read_topics(bootstrap, [topic], properties=properties)[topic]
    ]
    if not deduplicate:
        return sessions
    unique: dict[str, dict[str, Any]] = {}
    for session in sessions:
        unique.setdefault(session["session_id"], session)
    return list(unique.values())
