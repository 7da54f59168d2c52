"""Whether a broker gives idempotent producers their ids yet: part of a local cluster's readiness.

A KRaft broker that has just started lists itself as serving before it holds a block
of producer ids from the controller; until then it answers an idempotent producer's
`InitProducerId` with "coordinator load in progress", and librdkafka logs a warning
and retries. A started cluster is ready for producers once one has been given an id.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from typing import Final

from confluent_kafka import Producer

from framework.kafka.errors import CONFLUENT

__all__ = ["producer_id_refusal"]

_STATS_MS: Final = 50
_ASSIGNED: Final = "Assigned"


class _Lines(logging.Handler):
    """The probe's own client lines: its expected retries are not the user's warnings."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def producer_id_refusal(
    bootstrap: str, properties: Mapping[str, str] | None, timeout: float
) -> str | None:
    """None once an idempotent producer on `bootstrap` holds a producer id; else why not.

    Waits up to `timeout` seconds; the answer on timeout is the client's last line (or
    its idempotence state), for the caller's error.
    """
    lines = _Lines()
    logger = logging.getLogger(f"{__name__}.probe")
    logger.propagate = False
    logger.addHandler(lines)
    states: list[str] = []

    def observe(stats: str) -> None:
        states.append(str(json.loads(stats).get("eos", {}).get("idemp_state", "")))

    try:
        with CONFLUENT:
            producer = Producer(
                {
                    "client.id": "sessionizer-probe",
                    **(properties or {}),
                    "bootstrap.servers": bootstrap,
                    "enable.idempotence": True,
                    "statistics.interval.ms": _STATS_MS,
                    "stats_cb": observe,
                    "logger": logger,
                }
            )
            deadline = time.monotonic() + timeout
            while _ASSIGNED not in states and time.monotonic() < deadline:
                producer.poll(_STATS_MS / 1000)
            producer.flush(0)
    finally:
        logger.removeHandler(lines)
    if _ASSIGNED in states:
        return None
    if lines.lines:
        return lines.lines[-1]
    return f"idempotence state {states[-1] if states else 'unknown'}"
