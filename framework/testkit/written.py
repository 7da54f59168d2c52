"""What the node writes for a session: its result as it reads back from the sessions topic.

The kit runs every finished session through the node's own encoder
(`sessionizer.sinks.encode_session`), so a test sees what downstream will see (a
set as a sorted list, a tuple as a list, a datetime as ISO 8601 text) and a
result the node could not encode becomes the node's `session-unencodable` dead
letter, which `assert_exact` and `assert_batch` report as a failure.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Final

from sessionizer.records import FinishedSession
from sessionizer.sinks import DeadLetter, UnsendableSession, encode_session

__all__ = ["UNSENDABLE", "as_written", "unsendable_problem"]

UNSENDABLE: Final = frozenset({"session-unencodable", "session-too-large"})
"""Dead-letter reasons of sessions the node could not send."""
_FIXED: Final = frozenset(
    {"session_id", "key", "stream", "first_offset", "last_offset", "first_ts", "last_ts"}
    | {"fragments"}
)


def as_written(session: FinishedSession) -> FinishedSession:
    """The session with the result its JSON record carries (unchanged if it cannot be encoded)."""
    try:
        record = json.loads(encode_session(session))
    except UnsendableSession:
        return session  # the sink turns it into its reference dead letter, as a node's does
    fixed = _FIXED | {"truncated"} if session.truncated else _FIXED
    result = {name: value for name, value in record.items() if name not in fixed}
    return replace(session, result=result)


def unsendable_problem(name: str, letters: list[DeadLetter]) -> str | None:
    """An assertion message for the first session the node could not send, if any."""
    for letter in letters:
        if letter.reason in UNSENDABLE:
            return (
                f"{name}: session {letter.session_id} (key {letter.session_key!r}) cannot be "
                f"sent: {letter.reason}: {letter.error}; a node would write it to the "
                "dead-letter topic instead. close() must return JSON: dicts with string keys, "
                "lists, str, finite numbers, bools, None (sets of strings or numbers, dates "
                "and decimals are converted: docs/sessions.md)"
            )
    return None
