"""Bounds every package checks input against (a leaf module: it imports nothing).

Like `framework.kernel.errors`, this module is imported by `router`, `sessionizer` and
`state`, so that one number has one name: the wire decoder, the session engine
and the state record agree on what an event time or a session key may be.
"""

__all__ = ["MAX_EVENT_TIME_MS", "MAX_KEY_BYTES", "MIN_EVENT_TIME_MS"]

MIN_EVENT_TIME_MS = 0
"""The earliest event time accepted: 1970-01-01T00:00:00Z, in epoch milliseconds."""

MAX_EVENT_TIME_MS = 253_402_300_799_999
"""The latest event time accepted: 9999-12-31T23:59:59.999Z (fits a signed 64-bit integer)."""

MAX_KEY_BYTES = 4096
"""The longest session key accepted, in UTF-8 bytes (it is stored in every ignore-list entry)."""
