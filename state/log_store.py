"""`LogStateStore`: exactly-once state, read from the compacted `<app>.state` topic.

docs/exactly-once.md has the protocol. The state of an exactly-once stream is
committed in its node's Kafka transaction, with its output, as a record of
`<app>.state` keyed by stream (the sending is `framework.node.transactions`').
This store reads it back when a stream is taken, and keeps ZooKeeper for what
ZooKeeper does best: the claim's epoch check on `load`, and a *hint* copy of
each committed record (`commit_many`, written after the transaction), which
`status` shows and handovers version themselves by.

`load(stream, epoch)`: (1) ZooKeeper's epoch check (`FencedError` if the stream
moved); (2) `before_read(stream)`: the node fences the transactional id the
stream's writer record names and names its own (`state.writers`), so no earlier
owner's commit can land after the read; (3) the newest committed record of the stream,
read with `read_committed`. ZooKeeper's record wins only when it is from a
later owner epoch than the log's (`streams reset`, or an at-least-once node that
ran the stream since): the log's is otherwise the newer or the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from framework.kernel.errors import SessionizerError
from state.errors import StateError
from state.record import StreamState
from state.store import FencedStateStore

__all__ = ["LogStateStore", "StateLog"]


class StateLog(Protocol):
    """The newest committed record per key (`framework.kafka.transactional.CommittedLog`)."""

    def latest(self, key: bytes, timeout: float) -> bytes | None:
        """The newest committed value of `key`; None if none; raises on a timeout."""
        ...


class LogStateStore:
    """A `StateStore` whose truth is the transactional log; ZooKeeper keeps epochs and hints."""

    def __init__(
        self,
        hints: FencedStateStore,
        log: StateLog,
        *,
        before_read: Callable[[str], None],
        timeout: float,
        prepare: Callable[[Sequence[str]], None] | None = None,
    ) -> None:
        self.hints = hints
        self.log = log
        self._before_read = before_read
        self._prepare = prepare
        self.timeout = timeout
        self.limit_bytes = hints.limit_bytes

    def prepare(self, streams: Sequence[str]) -> None:
        """Before an assignment's loads: fence the earlier owners of all its streams at once,
        then read all their hints at once (`FencedStateStore.prepare`).

        Done before their epoch checks: a stream that moved on meanwhile only has its
        newer owner's producer fenced, which then drops it (no commit can go wrong).
        """
        if self._prepare is not None:
            self._prepare(streams)
        self.hints.prepare(streams)

    def load(self, stream: str, epoch: int) -> StreamState:
        """Check the epoch, fence the earlier owners, then read the newest committed state."""
        # `stored`: the owner epoch ZooKeeper's record was written at.
        hint, stored = self.hints.load_stored(stream, epoch)
        try:
            self._before_read(stream)  # the fence: nothing commits after the read
            data = self.log.latest(stream.encode(), self.timeout)
        except SessionizerError as exc:
            self.hints.release(stream)
            raise StateError(
                f"stream {stream}: cannot take its transactional state: {exc}"
            ) from exc
        if data is None:
            return hint  # never committed in a transaction: fresh, or at-least-once until now
        logged = StreamState.decode(data, stream=stream)  # CorruptStateError: quarantined
        if stored > logged.epoch:
            # ZooKeeper's record is from a later owner than the log's: a writer that bypassed
            # the log (`streams reset` writes the version it bumps to; an at-least-once node).
            return hint
        state = replace(logged, epoch=epoch)
        if state != hint:
            self._catch_up(stream, state)
        return state

    def _catch_up(self, stream: str, state: StreamState) -> None:
        """The hint lags the log (its owner died between the two writes): write it now, or a
        stream with no new input would show (and `status` report) the older state for ever."""
        try:
            self.hints.commit(stream, state)
        except StateError:
            self.hints.release(stream)
            raise

    def commit(self, stream: str, state: StreamState) -> None:
        """Write the ZooKeeper hint of a state its transaction committed."""
        self.hints.commit(stream, state)

    def commit_many(self, states: Sequence[StreamState]) -> dict[str, StateError | None]:
        """Write the ZooKeeper hints of states their transactions committed."""
        return self.hints.commit_many(states)

    def release(self, stream: str) -> None:
        """Stop owning the stream here."""
        self.hints.release(stream)

    def version(self, stream: str) -> int | None:
        """The ZooKeeper version of the stream's hint as last written here (handovers)."""
        return self.hints.version(stream)

    @property
    def sizes(self) -> Mapping[str, int]:
        """Bytes of the last record committed, per owned stream."""
        return self.hints.sizes
