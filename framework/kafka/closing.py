"""`close_aside`: close a Kafka client given up on, on a thread of its own.

A client replaced because it could not reach or deliver to Kafka may wait in its
close (librdkafka's consumer that knows no broker; kafka-python's producer flushing
batches it will never deliver).  It is no longer anyone's client, and the node's
loop, which replaced it, must not wait with it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import structlog

__all__ = ["close_aside"]

_log = structlog.get_logger(__name__)


def close_aside(close: Callable[[], object], what: str) -> threading.Thread:
    """Run `close` on a daemon thread named after `what`; a failure is logged, not raised."""

    def run() -> None:
        try:
            close()
        except Exception as exc:  # nobody waits for this close: its failure is only logged
            _log.warning("client_close_failed", client=what, error=repr(exc))

    thread = threading.Thread(target=run, name=f"close-{what}", daemon=True)
    thread.start()
    return thread
