"""`Checkpoint`: the one place that orders a node's output, state commits and handovers.

No state commit may cover output the sink has not confirmed (DESIGN section 5,
docs/nodes.md "One loop, and the order that makes the guarantee").  `commit`
runs these steps, in this order:

1. **Flush** (at-least-once): wait for the sink.  If it fails, every stream with
   output since the last good flush is **rewound** to its last commit (a fresh
   task from the committed state, re-read from there) and nothing is committed.
2. **Commit the states** that moved, in one batch, while the coordinator is
   connected; a stream still replaying what its previous owner had read is not
   committed (its stored state is the better one).
3. **Fencing**: a commit fenced by a new owner, or of unknown outcome, drops the
   stream and reports it to the coordinator; it is never written again.  A state
   over the size limit is counted; any other failure is retried next interval.
4. **Send the held output** (at-most-once): only the streams just committed send
   what they held back, and the sink is flushed; a stream that was held at its
   bound (`--max-unsent`) is read again.

`deliver` hands one record's output to the sink: a failed send rewinds as in
step 1; at-most-once output piling up to its bound commits that stream at once
(steps 2 to 4) and, if that did not let it go, stops reading it (the **hold**).

`release` (a planned release) commits (steps 1 to 4) and then:

5. **Hands over** each released stream whose engine equals its last commit
   (`framework.node.handover.NodeHandover.give`); the claims go after.

Exactly-once (`transactions` given, docs/exactly-once.md) replaces steps 1 to 4:
output goes into the node's one open transaction as it is produced; each interval
every stream whose state moved, and every stream with output in the transaction,
sends its state record, and the transaction commits; only then is ZooKeeper's
hint written. A failed send or an aborted transaction aborts and **rewinds** every
stream in it; a **fenced** (or broken) producer drops every stream without
committing anything and reports them (`producer_fenced`), and the node goes on
with a new producer; streams lost (`lost`) with output in the transaction abort
it, never commit it. Step 5 is unchanged: a handover is written only for a
stream at the state its last transaction committed; then its writer record is
cleared, so that its next owner fences nothing.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from framework.node.deliveries import Deliveries
from framework.node.handover import NodeHandover
from framework.node.metrics import NodeMetrics
from framework.node.ports import Coordinator
from framework.node.stats import NodeStats
from framework.node.streams import OwnedStreams
from framework.node.task import Output, StreamTask
from framework.node.transactions import NodeTransactions, TxnOutcome
from state.errors import CommitUncertainError, FencedError, StateError, StateTooLargeError
from state.record import DEFAULT_LIMIT_BYTES, StreamState
from state.store import StateStore

__all__ = ["Checkpoint"]


class Checkpoint:
    """Owns the commit order of one node: flush, commit, fence, send held output, hand over."""

    def __init__(
        self,
        *,
        out: Deliveries,
        store: StateStore,
        coordinator: Coordinator,
        streams: OwnedStreams,
        handover: NodeHandover,
        stats: NodeStats,
        log: Any,
        metrics: NodeMetrics | None,
        interval: float,
        transactions: NodeTransactions | None = None,
    ) -> None:
        self._out = out
        self._txns = transactions
        """Exactly-once: the node's transactional producer (None: the other modes)."""
        self._store = store
        self._coordinator = coordinator
        self._streams = streams
        self._handover = handover
        self._stats = stats
        self._log = log
        self._metrics = metrics
        self._interval = interval
        self._last = time.monotonic()
        self._stale_hints: set[str] = set()
        """Exactly-once: streams whose ZooKeeper hint failed to follow their last transaction."""
        self._unconfirmed: dict[str, StreamTask] = {}
        """At-least-once: the streams with output since the last good flush, and the task
        that sent it (a task rewound or dropped since has nothing left to rewind)."""

    def expired(self) -> bool:
        """True once `--commit-interval` has passed since the last commit."""
        return time.monotonic() - self._last >= self._interval

    def deliver(self, task: StreamTask, outputs: list[Output]) -> None:
        """Pass on one record's output: rewind on a failed send, hold at-most-once at its bound."""
        if self._txns is not None:  # into the node's open transaction, as the task's output
            self._txns.writing(task.stream)
            if self._out.deliver(task, outputs):
                self._rewind([task.stream])  # aborts it first: every stream in it
            return
        if outputs and self._out.at_least_once:
            self._unconfirmed[task.stream] = task  # before the send: a failed one loses it
        if self._out.deliver(task, outputs):
            self._rewind(self._unconfirmed_streams())
        elif self._out.held(task):
            self._hold(task)

    def commit(self, streams: Sequence[str]) -> None:
        """Steps 1 to 4: flush, then commit the streams' state (the order is the guarantee)."""
        self._last = time.monotonic()
        if self._txns is not None:
            self._commit_transactions(streams, self._txns)
            return
        tasks = self._streams.tasks
        at_least_once = self._out.at_least_once
        # Step 1: flush; output the sink lost is replayed from the last commit.
        if at_least_once and not self._flush():
            self._rewind(self._unconfirmed_streams())
            return
        started = time.monotonic()
        # Steps 2 and 3: commit what moved; fenced streams are dropped.
        committed = self._commit_states([tasks[s] for s in streams if s in tasks])
        if not at_least_once:
            self._send_held(committed)  # step 4
        seconds = time.monotonic() - started
        self._stats.commit_latency(seconds, len(streams))
        if self._metrics is not None and streams:
            self._metrics.commit_latency.observe(seconds)

    def release(self, streams: Sequence[str]) -> None:
        """A planned release: commit (steps 1 to 4), then hand the engines over (step 5)."""
        tasks = self._streams.tasks
        self.commit([s for s in streams if s in tasks])
        # Step 5: committed, so each engine at its commit can go to the next owner.
        if self._handover.writes:
            released = [tasks[s] for s in streams if s in tasks]
            self._handover.give([t for t in released if self._at_commit(t)], self._store)
        if self._txns is not None:
            for stream in streams:
                self._release_writer(stream, self._txns)

    def _release_writer(self, stream: str, txns: NodeTransactions) -> None:
        try:
            txns.release(stream)
        except StateError as exc:  # the next taker fences this node's producer: a rewind here
            self._log.warning("writer_record_kept", stream=stream, error=str(exc))

    def lost(self, streams: Sequence[str]) -> None:
        """Exactly-once: streams lost without a commit; an open transaction with their output
        is aborted (every other stream in it rewound), never committed."""
        if self._txns is None:
            return
        lost = [s for s in streams if self._txns.in_transaction(s)]
        self._txns.retain([s for s in self._txns.streams if s not in streams])
        if lost:
            self._log.warning("transaction_aborted", streams=lost, note="streams lost")
            self._rewind([])

    # -- the steps -------------------------------------------------------------------

    def _flush(self) -> bool:
        """Wait for the sink; True (and nothing left unconfirmed) if all it was given is durable."""
        if not self._out.flush(self._streams.tasks.values()):
            return False
        self._unconfirmed.clear()
        return True

    def _unconfirmed_streams(self) -> list[str]:
        """The owned streams whose output since the last good flush is not known to be durable."""
        tasks = self._streams.tasks
        return sorted(s for s, task in self._unconfirmed.items() if tasks.get(s) is task)

    def _rewind(self, streams: Sequence[str]) -> None:
        """Replace the tasks by fresh ones from their last commits, and re-read from there
        (exactly-once: abort the transaction first, and rewind every stream in it too)."""
        if not streams and (self._txns is None or not self._txns.touched):
            return
        tasks = self._streams.tasks
        if self._txns is not None:  # nothing sent in the transaction is ever committed
            in_transaction = self._txns.touched
            outcome = self._txns.abort()
            if outcome.result != "aborted":
                self._lose_all(TxnOutcome(outcome.result, "the abort before a rewind failed"))
                return
            streams = sorted({*streams, *in_transaction} & tasks.keys())
        rewound = []
        for stream in streams:
            tasks[stream] = tasks[stream].rewound()
            self._unconfirmed.pop(stream, None)
            self._stats.rewinds += 1
            rewound.append(stream)
        if rewound:
            self._log.warning("streams_rewound", streams=rewound)
        self._streams.reassign()

    def _hold(self, task: StreamTask) -> None:
        """At-most-once output is piling up uncommitted: try to commit it now, else stop reading."""
        self.commit([task.stream])
        if self._streams.tasks.get(task.stream) is task and self._out.held(task):
            self._log.warning("stream_held", stream=task.stream, unsent=len(task.unsent))
            self._streams.reassign()

    def _commit_states(self, tasks: list[StreamTask]) -> list[StreamTask]:
        """Steps 2 and 3: commit the tasks whose state moved, in one batch; return those now
        committed."""
        if not self._coordinator.connected:
            return []  # a write now would wait for the reconnect; commit at the next interval
        # A replaying task's stored state is still the better one; an unchanged one is stored.
        live = [task for task in tasks if not task.replaying]
        states = {task.stream: task.snapshot() for task in live}
        changed = [states[task.stream] for task in live if states[task.stream] != task.committed]
        outcomes = self._store.commit_many(changed) if changed else {}
        committed = []
        for task in live:
            error = outcomes.get(task.stream)
            if error is not None:
                self._commit_failed(task, error)
                continue
            if task.stream in outcomes:
                task.committed_as(states[task.stream])
                self._unconfirmed.pop(task.stream, None)  # its output is under this commit
                self._stats.commits += 1
            committed.append(task)
        self._stats.skipped_commits += len(live) - len(changed)
        return committed

    def _commit_failed(self, task: StreamTask, exc: StateError) -> None:
        """Step 3: a fenced or uncertain commit drops the stream; the others are retried."""
        if isinstance(exc, FencedError | CommitUncertainError):
            self._log.warning("stream_fenced", stream=task.stream, error=str(exc))
            self._streams.drop([task.stream])
            self._coordinator.report_fenced(task.stream)
        elif isinstance(exc, StateTooLargeError):
            # The engine bounds its state by construction; this is a bug worth shouting about.
            self._stats.oversized_states += 1
            self._log.error("state_too_large", stream=task.stream, error=str(exc))
        else:
            self._log.warning("commit_failed", stream=task.stream, error=str(exc))

    # -- exactly-once --------------------------------------------------------------

    def _commit_transactions(self, streams: Sequence[str], txns: NodeTransactions) -> None:
        """Every moved stream's state record, and every stream's with output, then one commit;
        then ZooKeeper's hints."""
        tasks = self._streams.tasks
        orphans = txns.retain(tasks.keys())  # streams dropped since
        self._out.dead_letter_log.maybe_report(tasks.values())  # as a flush would
        if orphans:  # their output has no state record to go with it: never committed
            self._log.warning("transaction_aborted", streams=sorted(orphans), note="dropped")
            self._rewind([])
        if not self._coordinator.connected:
            return  # the hints would wait for the reconnect; the transaction waits with them
        started = time.monotonic()
        in_transaction = txns.touched
        # A replaying stream is committed only with output (its record goes back meanwhile).
        wanted = set(streams)
        live = [
            t for s, t in tasks.items() if s in in_transaction or (s in wanted and not t.replaying)
        ]
        states = {task.stream: task.snapshot() for task in live}
        due = [t for t in live if t.stream in in_transaction or states[t.stream] != t.committed]
        records: dict[str, bytes] = {}
        for task in due:
            try:
                records[task.stream] = states[task.stream].encode(limit=DEFAULT_LIMIT_BYTES)
            except StateTooLargeError as exc:
                self._commit_failed(task, exc)
                self._rewind([task.stream])  # the transaction cannot commit without it
                return
        outcome = txns.commit(records)
        committed = []
        if outcome.result == "committed":
            if in_transaction:  # output, not only state records, was acknowledged
                self._out.stall.delivered()
            for stream in records:
                tasks[stream].committed_as(states[stream])
                committed.append(states[stream])
            self._stats.commits += len(records)
        elif outcome.result == "aborted":
            self._aborted(sorted(records), outcome.error)
            self._rewind(sorted(records))
        else:
            self._lose_all(outcome)
        self._stats.skipped_commits += len(live) - len(due)
        self._write_hints(committed)
        seconds = time.monotonic() - started
        self._stats.commit_latency(seconds, len(streams))
        if self._metrics is not None and streams:
            self._metrics.commit_latency.observe(seconds)

    def _write_hints(self, states: list[StreamState]) -> None:
        """ZooKeeper's copy of the committed states: a fenced one still drops the stream; one
        that failed otherwise is written again with the next round (even with no new input)."""
        tasks = self._streams.tasks
        written = {state.stream for state in states}
        states += [tasks[s].committed for s in self._stale_hints - written if s in tasks]
        self._stale_hints = set()
        if not states:
            return
        for stream, error in self._store.commit_many(states).items():
            if error is not None and stream in tasks:
                self._commit_failed(tasks[stream], error)
                if stream in tasks:  # not dropped: retried
                    self._stale_hints.add(stream)

    def _aborted(self, streams: list[str], error: str) -> None:
        """A transaction that could not commit was aborted: counted, then rewound."""
        self._stats.sink_failures += 1
        self._out.stall.failed(error)
        if self._metrics is not None:
            _aborts(self._metrics).inc()
        self._log.warning("transaction_aborted", streams=streams, error=error, note="rewinding")

    def _lose_all(self, outcome: TxnOutcome) -> None:
        """The producer is fenced (a taker fenced it) or broken: drop every stream, commit
        nothing; their next owners (this node too) read what committed from the log."""
        assert self._txns is not None
        streams = sorted(self._streams.tasks)
        event = "producer_fenced" if outcome.result == "fenced" else "transaction_broken"
        if outcome.result != "fenced":  # fenced: a taker's doing, not the sink's
            self._out.stall.failed(outcome.error)
        self._log.warning(event, streams=streams, error=outcome.error, note="streams dropped")
        self._txns.renewed()
        for stream in streams:
            self._store.release(stream)
        self._streams.drop(streams)
        for stream in streams:
            self._coordinator.report_fenced(stream)

    def _at_commit(self, task: StreamTask) -> bool:
        """Step 5: True if the task's engine equals its stream's last commit here."""
        if self._store.version(task.stream) is None or task.replaying or task.unsent:
            return False  # not committed here, or output still held: the next owner replays
        return task.snapshot() == task.committed  # else the engine moved past (commit failed)

    def _send_held(self, committed: list[StreamTask]) -> None:
        """Step 4 (at-most-once): the committed streams send their held output; flush."""
        released = [self._out.send_unsent(task) for task in committed]
        self._flush()
        if any(released):
            self._streams.reassign()


def _aborts(metrics: NodeMetrics) -> Any:
    """`sessionizer_transactions_aborted_total`, registered once per node's registry."""
    counter = getattr(metrics, "_transactions_aborted", None)
    if counter is None:
        from prometheus_client import Counter

        counter = Counter(
            "sessionizer_transactions_aborted",
            "Exactly-once transactions aborted (their streams rewound)",
            registry=metrics.registry,
        )
        metrics._transactions_aborted = counter  # type: ignore[attr-defined]
    return counter
