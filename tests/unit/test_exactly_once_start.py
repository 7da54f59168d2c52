"""An exactly-once node's start: a missing state topic refuses it, a held-back one does not.

Chaos found a node started right after two `kill -9`s exit 2 ("cannot reach Kafka")
after 30 s: a dead node's open transaction held the state topic's last stable
offset back, and the start read it to its end with `read_committed`. Such a
transaction stays open until a taker fences the dead node's id, and the starting
node may be the taker it waits for.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

import pytest
from structlog.testing import capture_logs

from framework.kafka.errors import ClientError
from framework.kafka.transactional import not_read_to_end
from framework.kernel.config import ConnectionConfig
from framework.node import exactly_once
from framework.node.config import NodeConfig
from state.store import MemoryStateStore
from state.writers import MemoryWriters

CONFIG = NodeConfig(
    ConnectionConfig("zk:1", "kafka:1", "app"), delivery="exactly-once", node_id="n7"
)


class StateLog:
    """A committed log whose one read fails with `error`; records whether it was closed."""

    topic = "app.state"

    def __init__(self, error: ClientError) -> None:
        self.error = error
        self.closed = False

    def latest(self, key: bytes, timeout: float) -> bytes | None:
        raise self.error

    def close(self) -> None:
        self.closed = True


def _start(monkeypatch: pytest.MonkeyPatch, log: StateLog) -> Any:
    monkeypatch.setattr(exactly_once, "open_committed_log", lambda *args, **kwargs: log)
    with ExitStack() as stack:
        return exactly_once.exactly_once_parts(
            CONFIG, "app-n7", MemoryStateStore(), MemoryWriters(), stack
        )


def test_a_state_log_held_back_by_an_open_transaction_does_not_stop_the_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = StateLog(not_read_to_end("app.state", [0], 30.0))
    with capture_logs() as logs:
        parts = _start(monkeypatch, log)
    assert parts.store is not None and parts.transactions is not None
    (warning,) = [e for e in logs if e["event"] == "state_log_behind"]
    assert warning["node"] == "n7"
    assert "not read to their end in 30 s" in warning["error"]


def test_a_missing_state_topic_still_stops_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    log = StateLog(ClientError("topic app.state does not exist (run `provision`)"))
    with pytest.raises(ClientError, match="run `provision`"):
        _start(monkeypatch, log)
    assert log.closed
