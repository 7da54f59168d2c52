"""`NodeTransactions`: a node's one transactional producer and its open transaction (exactly-once).

docs/exactly-once.md has the protocol. The node writes every owned stream's
output, and at each commit every such stream's state record, in one transaction
of one producer, `transactional.id = <app>.node.<node>.<incarnation>.<generation>`
(`node_transactional_id`): unique to this process and, after a fence or a lost
commit, to the producer that replaced the last one. A stream's *writer record*
(`state.writers`) names the id that may hold its output in an open transaction:
a take (`open`, called by `state.log_store.LogStateStore` before it reads the
state) fences the id the record names, then names this one; a graceful release
(`release`) clears it. A transaction's outcome is every stream's in it: an abort
rewinds them all, and a fenced or broken producer loses them all (`renewed`:
the node drops every stream and goes on with a new producer).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final, Literal, Unpack

import structlog

from framework.kafka.errors import ClientError, SendFailed
from framework.kafka.producer import DeliveryFailure, SendOptions
from framework.kafka.transactional import (
    ProducerFenced,
    TransactionalProducer,
    TransactionRetriable,
)
from framework.kernel.errors import SessionizerError
from state.writers import WriterRecords

__all__ = ["CommitResult", "NodeTransactions", "TxnOutcome", "node_transactional_id"]

CommitResult = Literal["committed", "aborted", "fenced", "broken"]
"""`aborted`: nothing of it is visible, rewind; `fenced`: a taker fenced this producer;
`broken`: the transaction's end is not known (a commit with no answer by the delivery
timeout may still have landed, and an abort after it proves nothing) or neither commit nor
abort went through. Fenced or broken, the producer is closed and every stream dropped, so
that each next owner reads what did commit from `<app>.state`; a rewind from memory could
repeat it."""

_log = structlog.get_logger("sessionizer.node")

_MAX_FENCES: Final = 8
"""Most fences in flight at once (an assignment of a dead node's streams needs one)."""
_RETRY_PAUSE_S: Final = 0.1


@dataclass(frozen=True)
class TxnOutcome:
    """How the transaction ended, and why when it did not commit."""

    result: CommitResult
    error: str = ""


def node_transactional_id(app: str, node: str, incarnation: str) -> str:
    """`<app>.node.<node>.<incarnation>`: never reused, so a fence meant for one producer
    never hits a later one (docs/exactly-once.md)."""
    return f"{app}.node.{node}.{incarnation}"


class NodeTransactions:
    """The node's transactional producer; used from the node's loop thread only."""

    def __init__(
        self,
        opener: Callable[[str], TransactionalProducer],
        *,
        app: str,
        node: str,
        state_topic: str,
        timeout: float,
        writers: WriterRecords,
    ) -> None:
        self._opener = opener
        self.app = app
        self.node = node
        self.state_topic = state_topic
        self.timeout = timeout
        """How long a commit, an abort or `init_transactions` may take (`--delivery-timeout`)."""
        self._writers = writers
        self._incarnation = uuid.uuid4().hex[:12]
        self._generation = 0
        self._producer: TransactionalProducer | None = None
        self._owned: set[str] = set()
        """Streams whose writer record names this producer."""
        self._touched: set[str] = set()
        """Streams with output in the open transaction."""
        self._writing: str | None = None
        """The stream the next sends are output of (`writing`)."""
        self._fenced: set[str] = set()
        """Ids this node fenced: a fenced id stays fenced (no one opens it again)."""
        self._pool: ThreadPoolExecutor | None = None

    @property
    def transactional_id(self) -> str:
        """The id of the producer in use (or the next one opened)."""
        incarnation = f"{self._incarnation}.{self._generation}"
        return node_transactional_id(self.app, self.node, incarnation)

    # -- ownership -------------------------------------------------------------------

    def open(self, stream: str) -> None:
        """Take the stream's output over: fence the id its writer record names, then name
        ours (before its state is read); raises `ClientError` or `StateError`."""
        if stream in self._touched:  # an earlier ownership's output: the next commit aborts it
            raise ClientError(
                f"stream {stream}: output of its previous ownership here is still in the "
                f"open transaction of {self.transactional_id}; taken again after the next commit"
            )
        self._ready()
        writer, version = self._writers.read(stream)
        if writer is not None and writer != self.transactional_id:
            self._fence(writer)
        self._writers.claim(stream, self.transactional_id, version)
        self._owned.add(stream)

    def open_many(self, streams: Sequence[str]) -> None:
        """Before an assignment's takes: open this producer and fence every other id the
        streams' writer records name, at once. A failure is left for `open` to meet again."""
        try:
            self._ready()
            named = {self._writers.read(stream)[0] for stream in streams}
        except SessionizerError:
            return
        ours = self.transactional_id
        others = sorted(w for w in named if w is not None and w != ours and w not in self._fenced)
        if others:
            list(self._workers().map(self._try_fence, others))

    def _ready(self) -> TransactionalProducer:
        """This node's producer, `init_transactions` run (once per producer)."""
        if self._producer is None:
            producer = self._opener(self.transactional_id)
            try:
                producer.init(self.timeout)
            except ClientError:
                producer.close(0)
                self._generation += 1  # its init may have landed: never reused
                raise
            self._producer = producer
            _log.info("transactional_producer_ready", node=self.node, id=producer.transactional_id)
        return self._producer

    def _fence(self, writer: str) -> None:
        """`init_transactions` under another id: its producer's open transaction is aborted
        and it can never commit again."""
        if writer in self._fenced:
            return
        producer = self._opener(writer)
        try:
            producer.init(self.timeout)
        finally:
            producer.close(0)
        self._fenced.add(writer)
        _log.info("writer_fenced", node=self.node, fenced=writer, note="it can never commit again")

    def _try_fence(self, writer: str) -> None:
        try:
            self._fence(writer)
        except SessionizerError:
            return  # `open` fences it again, and fails the take if it still cannot

    def _workers(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(_MAX_FENCES, thread_name_prefix="fence")
        return self._pool

    def owns(self, stream: str) -> bool:
        """True while the stream's writer record names this producer (as far as it knows)."""
        return stream in self._owned

    def in_transaction(self, stream: str) -> bool:
        """True if the stream has output in the open transaction."""
        return stream in self._touched

    @property
    def touched(self) -> frozenset[str]:
        """The streams with output in the open transaction."""
        return frozenset(self._touched)

    def release(self, stream: str) -> None:
        """A planned release: clear the writer record, so that the next taker fences nothing.
        Kept if the stream still has output in the open transaction (the taker fences it)."""
        self._owned.discard(stream)
        if stream not in self._touched:
            self._writers.clear(stream, self.transactional_id)

    def retain(self, streams: Collection[str]) -> frozenset[str]:
        """Forget every owned stream not in `streams` (dropped since); return those of them
        with output in the open transaction, which must therefore never commit."""
        self._owned.intersection_update(streams)
        return frozenset(s for s in self._touched if s not in streams)

    # -- the transaction -------------------------------------------------------------

    def abort(self) -> TxnOutcome:
        """Abort the open transaction: `aborted` (or nothing was open), `fenced` or `broken`
        (then the producer is replaced and every stream forgotten: `renewed`)."""
        producer = self._producer
        if producer is None or not producer.in_transaction:
            self._touched.clear()
            return TxnOutcome("aborted")
        return self._ended(self._abort(producer))

    def commit(self, records: Mapping[str, bytes]) -> TxnOutcome:
        """Send each stream's state record, then commit: every stream with output in the
        transaction must have one (else the transaction is aborted)."""
        missing = sorted(self._touched - records.keys())
        if missing:
            outcome = self.abort()
            if outcome.result != "aborted":
                return outcome
            return TxnOutcome("aborted", f"no state record for streams with output: {missing}")
        if not records:
            return TxnOutcome("committed")
        producer = self._producer
        if producer is None:
            return self._ended(TxnOutcome("broken", "no producer open on this node"))
        return self._ended(self._commit(producer, records))

    def _commit(self, producer: TransactionalProducer, records: Mapping[str, bytes]) -> TxnOutcome:
        try:
            if not producer.in_transaction:
                producer.begin()
            for stream, record in records.items():
                producer.send(self.state_topic, stream.encode(), record, partition=0)
            deadline = time.monotonic() + self.timeout
            while True:
                try:
                    producer.commit(max(0.1, deadline - time.monotonic()))
                    return TxnOutcome("committed")
                except TransactionRetriable as exc:
                    # A broker restart or a coordinator move: the same commit, again, until
                    # the delivery timeout; then the outcome is unknown, never assumed aborted.
                    if time.monotonic() >= deadline:
                        return TxnOutcome("broken", f"commit outcome unknown: {exc}")
                    time.sleep(_RETRY_PAUSE_S)
        except ProducerFenced as exc:
            return TxnOutcome("fenced", str(exc))
        except ClientError as exc:
            # Nothing open (its `begin` failed): nothing to abort either.
            opened = producer.in_transaction
            outcome = self._abort(producer) if opened else TxnOutcome("aborted")
            return TxnOutcome(outcome.result, f"{exc}; {outcome.error}".rstrip("; "))

    def _abort(self, producer: TransactionalProducer) -> TxnOutcome:
        try:
            producer.abort(self.timeout)
        except ProducerFenced as exc:
            return TxnOutcome("fenced", str(exc))
        except ClientError as exc:  # its transaction state is unknown: the caller replaces it
            return TxnOutcome("broken", f"abort failed: {exc}")
        return TxnOutcome("aborted")

    def _ended(self, outcome: TxnOutcome) -> TxnOutcome:
        """After a commit or abort: the open transaction is over either way; a fenced or
        broken producer is replaced."""
        self._touched.clear()
        if outcome.result in ("fenced", "broken"):
            self.renewed()
        return outcome

    def renewed(self) -> None:
        """Close the producer at once (waiting for an abort would hold the node's loop up
        while a broker restarts) and forget every stream: the next take opens the next
        generation's producer, and fences this one by its writer records."""
        producer, self._producer = self._producer, None
        self._generation += 1
        self._owned.clear()
        self._touched.clear()
        if producer is not None:
            producer.close(0.0)

    # -- RecordProducer: the sink's sends, into the open transaction ------------------

    def writing(self, stream: str) -> None:
        """The next sends are output of `stream`: its state record commits with them.

        Said by the node, not read from the output: a session a resize moved keeps the
        stream it began on in its record (and id) while a new stream writes it.
        """
        self._writing = stream

    def send(
        self, topic: str, key: bytes | None, value: bytes | None, **options: Unpack[SendOptions]
    ) -> None:
        """Queue one output record of the owned stream being written (`writing`) in the open
        transaction (begun at the first output after a commit)."""
        options.pop("token", None)
        stream = self._writing
        producer = self._producer
        if producer is None or stream not in self._owned:
            raise SendFailed(f"stream {stream!r} is not written by this node's producer")
        try:
            if not producer.in_transaction:
                producer.begin()
            self._touched.add(stream)  # before the send: a failed one may have gone out
            # No token: a transactional producer reports a failed delivery by its commit.
            producer.send(topic, key, value, **options)
        except SendFailed:
            raise
        except ClientError as exc:  # fenced: the sink fails, the rewind's abort tells
            raise SendFailed(str(exc), exc.detail) from exc

    def flush(self, timeout: float | None) -> list[DeliveryFailure]:
        """Nothing to wait for here: the transaction's commit flushes its records."""
        return []

    def close(self, timeout: float | None = None) -> None:
        """Close the producer (an open transaction is aborted, or left to be fenced)."""
        producer, self._producer = self._producer, None
        if producer is not None:
            producer.close(min(self.timeout, 5.0) if timeout is None else timeout)
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    def topic_names(self, timeout: float) -> list[str]:
        """Not offered by the transactional producer (the node never asks its sink)."""
        raise ClientError("topic_names is not offered by the transactional sink")

    def warm_metadata(self, topics: Sequence[str]) -> None:
        """Nothing to warm: the producer learns its topics at its first transaction."""

    @property
    def streams(self) -> Iterable[str]:
        """The streams whose writer record names this producer."""
        return list(self._owned)
