"""`StreamTransactions`: a node's transactional producers, one per owned stream (exactly-once).

docs/exactly-once.md has the protocol. A stream's producer (`transactional.id =
<app>.<stream>`) is opened, and `init_transactions` run, when the stream is
taken, before its state is read (`open`, called by `state.log_store.LogStateStore`);
the stream's output goes into its open transaction as it is produced (this
object is the sink's `RecordProducer`, routing each send by the stream of the
item it carries); `commit_many` sends each stream's state record to
`<app>.state` and commits, the streams in parallel; `abort`, `close` and
`close_stream`, `retain` end what the checkpoint or a drop no longer wants.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Final, Literal, Unpack

from framework.kafka.errors import ClientError, SendFailed
from framework.kafka.producer import DeliveryFailure, SendOptions
from framework.kafka.transactional import (
    ProducerFenced,
    TransactionalProducer,
    TransactionRetriable,
)

__all__ = ["CommitResult", "StreamTransactions", "TxnOutcome", "transactional_id"]

CommitResult = Literal["committed", "aborted", "fenced", "broken"]
"""`aborted`: nothing of it is visible, rewind; `fenced`: another owner has the stream;
`broken`: the transaction's end is not known (a commit with no answer by the delivery
timeout may still have landed, and an abort after it proves nothing) or neither commit nor
abort went through: the producer is closed and the stream dropped, so that its next owner
reads what did commit from `<app>.state`; a rewind from memory could repeat it."""

_MAX_WORKERS: Final = 32
"""Most commits (or inits) in flight at once: each is mostly a wait for its coordinator."""
_RETRY_PAUSE_S: Final = 0.1


@dataclass(frozen=True)
class TxnOutcome:
    """How one stream's transaction ended, and why when it did not commit."""

    result: CommitResult
    error: str = ""


def transactional_id(app: str, stream: str) -> str:
    """`<app>.<stream>`: the id follows the stream from owner to owner (fencing needs that)."""
    return f"{app}.{stream}"


class StreamTransactions:
    """The owned streams' transactional producers; used from the node's loop thread."""

    def __init__(
        self,
        opener: Callable[[str], TransactionalProducer],
        *,
        app: str,
        state_topic: str,
        timeout: float,
    ) -> None:
        self._opener = opener
        self.app = app
        self.state_topic = state_topic
        self.timeout = timeout
        """How long a commit, an abort or `init_transactions` may take (`--delivery-timeout`)."""
        self._producers: dict[str, TransactionalProducer] = {}
        self._pool: ThreadPoolExecutor | None = None
        """Kept between commit rounds (started at the first): a round starts no threads."""
        self._fresh: set[str] = set()
        """Streams whose producer `open_many` opened and no `open` has used yet."""

    # -- ownership -------------------------------------------------------------------

    def open(self, stream: str) -> None:
        """Open the stream's producer and fence every earlier one (before its state is read).

        A producer `open_many` just opened for the stream is used as it is.
        """
        if stream in self._fresh:
            self._fresh.discard(stream)
            return
        self.close_stream(stream)
        self._producers[stream] = self._initialised(stream)

    def open_many(self, streams: Sequence[str]) -> None:
        """Open several streams' producers at once (an assignment): each `init_transactions` is
        mostly a wait for its coordinator. A failure is left for `open` to meet again."""
        if len(streams) < 2:
            return
        opened = list(self._workers().map(self._try_initialised, streams))
        for stream, producer in zip(streams, opened, strict=True):
            if producer is not None:
                self.close_stream(stream)
                self._producers[stream] = producer
                self._fresh.add(stream)

    def _workers(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(_MAX_WORKERS, thread_name_prefix="txn")
        return self._pool

    def _initialised(self, stream: str) -> TransactionalProducer:
        producer = self._opener(transactional_id(self.app, stream))
        try:
            producer.init(self.timeout)
        except ClientError:
            producer.close(0)
            raise
        return producer

    def _try_initialised(self, stream: str) -> TransactionalProducer | None:
        try:
            return self._initialised(stream)
        except ClientError:
            return None

    def owns(self, stream: str) -> bool:
        """True while the stream has an open producer here."""
        return stream in self._producers

    def in_transaction(self, stream: str) -> bool:
        """True if the stream has output (or a state record) not committed nor aborted yet."""
        producer = self._producers.get(stream)
        return producer is not None and producer.in_transaction

    def close_stream(self, stream: str, *, wait: bool = True) -> None:
        """Close the stream's producer; an open transaction is aborted (or left to be fenced:
        at once without `wait`, for a producer whose transaction's end is lost already)."""
        self._fresh.discard(stream)
        producer = self._producers.pop(stream, None)
        if producer is not None:
            producer.close(min(self.timeout, 5.0) if wait else 0.0)

    def retain(self, streams: Collection[str]) -> None:
        """Close the producers of every stream not in `streams` (dropped since)."""
        for stream in [s for s in self._producers if s not in streams]:
            self.close_stream(stream)

    # -- the transaction -------------------------------------------------------------

    def abort(self, stream: str) -> CommitResult:
        """Abort the stream's open transaction: `aborted` (or nothing was open), `fenced`,
        or `broken` (the producer is closed)."""
        producer = self._producers.get(stream)
        if producer is None or not producer.in_transaction:
            return "aborted"
        return self._ended(stream, self._abort(stream, producer)).result

    def commit_many(self, records: Mapping[str, bytes]) -> dict[str, TxnOutcome]:
        """Per stream: send its state record, commit; the streams in parallel."""
        if len(records) <= 1:
            return {s: self._ended(s, self._commit(s, data)) for s, data in records.items()}
        pool = self._workers()
        futures = {s: pool.submit(self._commit, s, data) for s, data in records.items()}
        wait(futures.values())  # all settled, even if one raised
        return {stream: self._ended(stream, future.result()) for stream, future in futures.items()}

    def _ended(self, stream: str, outcome: TxnOutcome) -> TxnOutcome:
        """A fenced or broken producer is closed at once: waiting for its abort (5 s a stream,
        one after the other, while a broker restarts) would only hold up the node's loop."""
        if outcome.result in ("fenced", "broken"):
            self.close_stream(stream, wait=False)
        return outcome

    def _commit(self, stream: str, record: bytes) -> TxnOutcome:
        producer = self._producers.get(stream)
        if producer is None:
            return TxnOutcome("broken", f"stream {stream}: no producer open here")
        try:
            if not producer.in_transaction:
                producer.begin()
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
            outcome = self._abort(stream, producer) if opened else TxnOutcome("aborted")
            return TxnOutcome(outcome.result, f"{exc}; {outcome.error}".rstrip("; "))

    def _abort(self, stream: str, producer: TransactionalProducer) -> TxnOutcome:
        try:
            producer.abort(self.timeout)
        except ProducerFenced as exc:
            return TxnOutcome("fenced", str(exc))
        except ClientError as exc:  # its transaction state is unknown: the caller closes it
            return TxnOutcome("broken", f"abort failed: {exc}")
        return TxnOutcome("aborted")

    # -- RecordProducer: the sink's sends, routed by the stream of what they carry -----

    def send(
        self, topic: str, key: bytes | None, value: bytes | None, **options: Unpack[SendOptions]
    ) -> None:
        """Queue one output record in its stream's transaction (begun at its first output)."""
        stream = getattr(options.pop("token", None), "stream", None)
        producer = self._producers.get(stream) if isinstance(stream, str) else None
        if producer is None:
            raise SendFailed(f"no transactional producer for stream {stream!r} on this node")
        try:
            if not producer.in_transaction:
                producer.begin()
            # No token: a transactional producer reports a failed delivery by its commit.
            producer.send(topic, key, value, **options)
        except SendFailed:
            raise
        except ClientError as exc:  # fenced: the sink fails, the rewind's abort tells
            raise SendFailed(str(exc), exc.detail) from exc

    def flush(self, timeout: float | None) -> list[DeliveryFailure]:
        """Nothing to wait for here: each transaction's commit flushes its own records."""
        return []

    def close(self, timeout: float | None = None) -> None:
        """Close every producer (open transactions are aborted, or left to be fenced)."""
        for stream in list(self._producers):
            self.close_stream(stream)
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    def topic_names(self, timeout: float) -> list[str]:
        """Not offered by the transactional producers (the node never asks its sink)."""
        raise ClientError("topic_names is not offered by the transactional sink")

    def warm_metadata(self, topics: Sequence[str]) -> None:
        """Nothing to warm: each producer learns its topics at its first transaction."""

    @property
    def streams(self) -> Iterable[str]:
        """The streams with a producer open here."""
        return list(self._producers)
