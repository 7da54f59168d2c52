"""`Deliveries`: the node's output path: sends, flushes, dead letters and their log.

At-least-once: output goes to the sink as it is produced.  At-most-once: it
waits in the stream's `unsent` list until its state is committed, and the
stream is `held` once that list reaches `max_unsent`.  When a flush may happen,
what a failure rewinds and when held output is sent is the order kept by
`framework.node.checkpoint.Checkpoint` (DESIGN section 5).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from framework.node.config import NodeConfig
from framework.node.dead_letter_log import DeadLetterLog
from framework.node.sink_stall import SinkStallWatch
from framework.node.stats import NodeStats
from framework.node.task import Output, StreamTask
from sessionizer.errors import SinkError
from sessionizer.records import FinishedSession
from sessionizer.sinks import SessionSink, UnsendableSession, encode_session, session_reference

__all__ = ["Deliveries"]


class Deliveries:
    """Hands a node's output to its sink and says which streams a failure must rewind."""

    def __init__(self, sink: SessionSink, config: NodeConfig, stats: NodeStats, log: Any) -> None:
        self.sink = sink
        # Exactly-once sends as produced too, into the stream's open transaction.
        self.at_least_once = config.delivery != "at-most-once"
        self.max_unsent = config.max_unsent
        self._max_message_bytes = config.max_message_bytes
        self._stats = stats
        self._log = log
        self.dead_letter_log = DeadLetterLog(
            log, interval=config.stats_interval, warn_share=config.dead_letter_warn_share
        )
        self.stall = SinkStallWatch(config.sink_stall_timeout, log)
        self._unflushed = False
        """Output was handed to the sink since its last flush (only then does a flush prove
        delivery)."""

    def deliver(self, task: StreamTask, outputs: list[Output]) -> bool:
        """Pass on one record's output; True if the sink failed (the caller rewinds)."""
        if not outputs:
            return False
        if not self.at_least_once:
            task.unsent.extend(outputs)  # sent after the next state commit
            return False
        try:
            self._send(outputs)
        except SinkError as exc:
            self._failed(exc)
            return True
        return False

    def flush(self, tasks: Iterable[StreamTask]) -> bool:
        """Wait for the sink; True if everything given to it is durable."""
        tasks = list(tasks)
        # Every commit interval: the dead letters' summaries are due whether or not any came.
        self.dead_letter_log.maybe_report(tasks)
        sent, self._unflushed = self._unflushed, False
        try:
            self.sink.flush()
        except SinkError as exc:
            self._failed(exc)
            return False
        if sent:
            self.stall.delivered()
        return True

    def held(self, task: StreamTask) -> bool:
        """True while the stream's held-back output is at its bound (at-most-once)."""
        return len(task.unsent) >= self.max_unsent

    def send_unsent(self, task: StreamTask) -> bool:
        """After the stream's commit: send what it held back; True if it was held."""
        was_held = self.held(task)
        outputs, task.unsent = task.unsent, []
        try:
            self._send(outputs)
        except SinkError as exc:
            self._failed(exc, lost=len(outputs))
        return was_held

    def _send(self, outputs: list[Output]) -> None:
        sink = self.sink
        self._unflushed = True
        for output in outputs:
            if isinstance(output, FinishedSession):
                # Counted only when some session was ever unsendable (an empty Counter is
                # false): summing it twice per session was a cost on every node's loop.
                before = sink.unsendable.total() if sink.unsendable else 0
                sink.emit(output)
                if sink.unsendable and sink.unsendable.total() != before:
                    self._unsendable(output)  # sent as its reference instead
            else:
                self._stats.dead_letter_reasons[output.reason] += 1
                self.dead_letter_log.record(output)
                sink.dead_letter(output)

    def _unsendable(self, session: FinishedSession) -> None:
        """Tell the dead-letter log about a session the sink replaced by its reference."""
        try:
            encode_session(session, max_bytes=self._max_message_bytes)
        except UnsendableSession as exc:  # the rare path: encoded again to learn why
            self.dead_letter_log.record(session_reference(session, exc.reason, exc.error))

    def _failed(self, exc: SinkError, *, lost: int | None = None) -> None:
        self._stats.sink_failures += 1
        self.stall.failed(str(exc))
        self._unflushed = False  # what was sent since the last flush is rewound, not delivered
        if not self.at_least_once:
            # The state has moved on already: the output is lost by choice of delivery mode.
            self._log.error("sink_failed", error=str(exc), lost=lost, delivery="at-most-once")
        else:
            self._log.warning("sink_failed", error=str(exc), note="rewinding to the last commit")
