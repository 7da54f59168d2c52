"""`SshConnections`: sshd connections, from auth-log fragments (format `sshd`).

The key is `"<host>:<sshd pid>"` (set by the router).  A connection ends at a
"Disconnected from" or "Connection closed by" line, after 10 minutes of
silence, or 24 hours after it began.  Result fields: host, pid, user, ip,
outcome ("accepted", "failed" or "no-auth"), failures (failed authentication
attempts), lines, disconnected.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sessionizer.processor import StreamProcessor

__all__ = ["END_PREFIXES", "SshConnections"]

END_PREFIXES = ("Disconnected from", "Connection closed by")
"""A message starting like this ends its connection."""

# syslog folds repeats: "message repeated 5 times: [ Failed password for ...]".
_REPEATED = re.compile(r"message repeated (\d+) times: \[ ?(.*)")
_FAILURES = ("Failed password", "Failed publickey", "Invalid user")


class SshConnections(StreamProcessor[dict[str, Any]]):
    """One sshd connection: who tried, from where, and whether they got in."""

    timeout = 10 * 60
    max_session_duration = 24 * 60 * 60  # a day-long connection is split daily

    def is_end(self, fragment: Mapping[str, Any]) -> bool:
        """Return True for the line that closes a connection."""
        return str(fragment.get("message", "")).startswith(END_PREFIXES)

    def open(self, key: str, fragment: Mapping[str, Any]) -> dict[str, Any]:
        """Start a connection."""
        return {
            "host": fragment["host"],
            "pid": fragment["pid"],
            "user": None,
            "ip": None,
            "accepted": False,
            "failures": 0,
            "lines": 0,
            "disconnected": False,
        }

    def update(self, session: dict[str, Any], fragment: Mapping[str, Any]) -> None:
        """Fold one log line into the connection."""
        message = str(fragment.get("message", ""))
        session["lines"] += 1
        for field in ("user", "ip"):  # None: the line names none ("" is a real user name)
            if fragment.get(field) is not None:
                session[field] = fragment[field]
        times, text = 1, message
        if repeated := _REPEATED.match(message):
            times, text = int(repeated[1]), repeated[2]
        if text.startswith(_FAILURES):
            session["failures"] += times
        elif text.startswith("Accepted "):
            session["accepted"] = True
        session["disconnected"] = session["disconnected"] or self.is_end(fragment)

    def close(self, key: str, session: dict[str, Any]) -> dict[str, Any]:
        """Return the connection with its outcome."""
        accepted = session.pop("accepted")
        outcome = "accepted" if accepted else "failed" if session["failures"] else "no-auth"
        return {**session, "outcome": outcome}
