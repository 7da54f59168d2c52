"""The transactional producer and the committed-log reader over kafka-python (>= 2.1).

`KafkaPythonTransactional` is the layer's `KafkaPythonProducer` (its `send`) with
`transactional_id` set and the transaction calls beside; every call into the
client runs inside `framework.kafka.errors`' `CLIENT`, and `_transactional`
sorts what came out by the transaction manager's state.

kafka-python (3.0) departs from the Java client where transactions meet errors:

- a produce error of the sequence family (`OutOfOrderSequenceNumber`,
  `UnknownProducerId`, after a broker restart) makes it bump the producer epoch
  itself (KIP-360), asynchronously: the manager goes to `BUMPING_PRODUCER_EPOCH`,
  then `READY`, and the broker aborts the open transaction on the way, with
  nothing said but that `send`, `commit_transaction` and `abort_transaction` are
  refused meanwhile ("Cannot call send in state BUMPING_PRODUCER_EPOCH"). Here
  such a transaction ends as *aborted* (`abort` waits for the bump, then fails
  the records still queued for it), or *fenced* if the bump was refused;
- it bumps on `InvalidProducerEpoch` too, and answers a refused bump with a fresh
  producer id: either lets a fenced producer take its id back (`_stay_fenced`
  makes both fatal, as fencing must be);
- a batch whose delivery timed out fails without failing the transaction: a
  commit checks every send first (`_start_ending`), else it would land without
  the batch's records.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any, Final

from kafka import TopicPartition
from kafka.errors import InvalidProducerEpochError, ProducerFencedError, TransactionAbortedError
from kafka.producer.transaction_manager import TransactionState

from framework.kafka.consumer import assigned_consumer
from framework.kafka.errors import CLIENT, ClientError, ClientTimeout
from framework.kafka.kafka_python import KafkaPythonProducer
from framework.kafka.transactional import (
    ProducerFenced,
    TransactionAborted,
    TransactionRetriable,
    not_read_to_end,
)

__all__ = ["KafkaPythonCommittedLog", "KafkaPythonTransactional"]

_FENCED: Final = frozenset({"ProducerFencedError", "InvalidProducerEpochError"})
_BUMPED: Final = (TransactionState.READY, TransactionState.BUMPING_PRODUCER_EPOCH)
"""The manager's states after an epoch bump ended (or while one runs) a transaction."""
_BUMP_POLL_S: Final = 0.01
_POLL_MS: Final = 200


class _Undelivered(ClientError):
    """A send of the transaction failed: it must be aborted."""


class KafkaPythonTransactional(KafkaPythonProducer):
    """`KafkaProducer(transactional_id=...)`. Its `commit_transaction` and `abort_transaction`
    wait without a bound, so the transaction manager's result is awaited with one here."""

    def __init__(self, transactional_id: str, settings: Mapping[str, Any]) -> None:
        self.transactional_id = transactional_id
        self._open = False
        self._ending: Any = None  # the commit or abort result still awaited
        self._ending_commit = False  # which of the two it is
        self._epoch: Any = None  # the producer id and epoch the transaction's end began at
        self._unknown = False  # an epoch bump overtook a commit: its outcome is not known
        self._block_s = int(settings.get("max_block_ms", 60_000)) / 1000
        super().__init__({**settings, "transactional_id": transactional_id})
        self._manager = self._producer._transaction_manager
        _stay_fenced(self._manager)

    @property
    def in_transaction(self) -> bool:
        """True between `begin` and the end of `commit` or `abort`."""
        return self._open

    def init(self, timeout: float) -> None:
        """`init_transactions` (bounded by the producer's `max_block_ms`)."""
        with self._transactional("init_transactions"):
            self._producer.init_transactions()

    def begin(self) -> None:
        """`begin_transaction` (local), once an epoch bump under way is over."""
        self._await_bump(time.monotonic() + self._block_s, "begin_transaction")
        with self._transactional("begin_transaction"):
            self._producer.begin_transaction()
        self._open = True

    def commit(self, timeout: float) -> None:
        """Flush, then end the transaction with a commit, waiting at most `timeout`."""
        self._end(True, timeout)

    def abort(self, timeout: float) -> None:
        """End the transaction with an abort, waiting at most `timeout`; a transaction an epoch
        bump ended is aborted already (the broker aborts it as it bumps)."""
        if self._unknown:  # an abort now would prove nothing about what the broker did
            raise ClientError(f"{self.transactional_id}: abort_transaction: outcome unknown")
        if self._open and self._ending is None and self._manager._current_state in _BUMPED:
            self._await_bump(time.monotonic() + timeout, "abort_transaction")
            if self._manager.has_fatal_error():  # the bump was refused: a newer owner exists
                raise ProducerFenced(f"{self.transactional_id}: epoch bump refused (fenced)")
            self._bumped_away()
            return
        self._end(False, timeout)

    def _await_bump(self, deadline: float, doing: str) -> None:
        """Wait while kafka-python bumps the producer epoch (no call is accepted meanwhile)."""
        while self._manager.is_bumping_epoch():
            if time.monotonic() >= deadline:
                raise TransactionRetriable(
                    f"{self.transactional_id}: {doing}: the producer epoch bump is not over"
                )
            time.sleep(_BUMP_POLL_S)

    def _bumped_away(self) -> None:
        """The bump aborted the transaction: fail what is still queued for it (it would go
        out in the next transaction that writes to its partitions), and forget its sends."""
        self._producer._accumulator.abort_undrained_batches(TransactionAbortedError())
        self._forget_sends()
        self._open = False

    def _end(self, commit: bool, timeout: float) -> None:
        doing = "commit_transaction" if commit else "abort_transaction"
        deadline = time.monotonic() + timeout
        if self._ending is not None and self._ending_commit != commit:
            # Waiting on the other one would report its end as this one's: an abort that
            # found a commit in flight would "succeed" when the commit landed.
            other = "commit_transaction" if self._ending_commit else "abort_transaction"
            raise ClientError(f"{self.transactional_id}: {doing}: {other} still in flight")
        with self._transactional(doing, ending=True):
            if self._ending is None:
                self._start_ending(commit, timeout)
            left_ms = max(0.0, deadline - time.monotonic()) * 1000
            done = self._ending.wait(timeout_ms=left_ms)
        if not done:
            raise TransactionRetriable(
                f"{self.transactional_id}: {doing} not done in {timeout:g} s"
            )
        self._ending = None
        if commit and self._manager.producer_id_and_epoch != self._epoch:
            # An epoch bump overtook the commit: kafka-python then reports a commit it never
            # sent as done, or the broker completed it first; which, nobody here knows.
            self._unknown = True
            raise TransactionAborted(f"{self.transactional_id}: {doing}: the epoch was bumped")
        self._forget_sends()  # each send's outcome was the transaction's
        self._open = False

    def _start_ending(self, commit: bool, timeout: float) -> None:
        """Flush (a commit), check every send of the transaction, then send EndTxn."""
        self._epoch = self._manager.producer_id_and_epoch
        if commit:
            self._producer.flush(timeout=timeout)
            # kafka-python fails a batch whose delivery timed out (a broker restart) without
            # failing the transaction: committing then would lose its records.
            failed = self._undelivered()
            if failed:
                raise _Undelivered(f"{len(failed)} sends failed (first: {failed[0]})")
        self._ending_commit = commit
        start = self._manager.begin_commit if commit else self._manager.begin_abort
        self._ending = start()
        self._producer._sender.wakeup()

    def close(self, timeout: float | None = None) -> None:
        """Abort an open transaction (best effort), then close the producer."""
        if self._open:
            # Else the next owner's init_transactions (or the broker's timeout) aborts it.
            with suppress(ClientError):
                self.abort(5.0 if timeout is None else timeout)
        with suppress(ClientError), CLIENT:  # a fenced (fatal) producer is released all the same
            self._producer.close(timeout=0 if self._open else timeout)

    @contextmanager
    def _transactional(self, doing: str, *, ending: bool = False) -> Iterator[None]:
        """`with` this around a transaction call: `ProducerFenced`, `TransactionAborted` or
        `TransactionRetriable` come out of it (`ending`: a commit or abort, whose wait may
        time out and be called again; any other failure ends it)."""
        try:
            with CLIENT:
                yield
        except ClientError as exc:
            if ending and not isinstance(exc, ClientTimeout):
                self._ending = None
            raise self._mapped(exc, doing) from exc

    def _mapped(self, exc: ClientError, doing: str) -> ClientError:
        text = f"{self.transactional_id}: {doing}: {exc.detail}"
        if exc.client_class in _FENCED or self._manager.has_fatal_error():
            return ProducerFenced(text)
        if isinstance(exc, _Undelivered):
            return TransactionAborted(text)
        if self._manager.has_abortable_error():
            return TransactionAborted(text)
        if isinstance(exc, ClientTimeout) or getattr(exc.__cause__, "retriable", False):
            return TransactionRetriable(text)
        return TransactionAborted(text)


def _stay_fenced(manager: Any) -> None:
    """Two departures of kafka-python's epoch bump from the Java client's, which would let a
    fenced producer (a zombie that wakes) take its id back from the id's newer owner:

    - it bumps on INVALID_PRODUCER_EPOCH (a produce with a fenced epoch): the coordinator
      takes a bump from the epoch just before the current one for a retry of the newer
      owner's own bump, and answers with the newer owner's epoch. Here it is fatal (fenced);
    - a bump refused so is followed by an InitProducerId without producer id, which fences
      the newer owner. Here the refusal is fatal (fenced).
    """
    manager._FATAL_ERRORS = manager._FATAL_ERRORS | {InvalidProducerEpochError}
    manager._NEEDS_EPOCH_BUMP_ERRORS = manager._NEEDS_EPOCH_BUMP_ERRORS - {
        InvalidProducerEpochError
    }

    def fenced(transaction_timeout_ms: int, result: Any) -> None:
        error = ProducerFencedError()
        manager.transition_to_fatal_error(error)
        result.done(error=error)

    manager._restart_epoch_bump_without_producer_id = fenced


class KafkaPythonCommittedLog:
    """A `read_committed` `KafkaConsumer` of every partition, kept between reads."""

    def __init__(
        self, bootstrap: str, topic: str, *, client_id: str, properties: Mapping[str, str]
    ) -> None:
        self.topic = topic
        self._bootstrap = bootstrap
        self._client_id = f"{client_id}-state"
        self._properties = dict(properties)
        self._reader: Any = None
        self._ends: Any = None  # read_uncommitted: its end offsets are the high watermarks
        self._values: dict[bytes, bytes | None] = {}
        self._partitions: list[TopicPartition] = []

    def latest(self, key: bytes, timeout: float) -> bytes | None:
        """The newest committed value of `key` up to the topic's high watermark as of now."""
        deadline = time.monotonic() + timeout
        try:  # `assigned_consumer`'s calls raise `ClientError`
            reader = self._reading()
            targets = self._ends.end_offsets(self._partitions)
            while True:
                left = [
                    tp.partition for tp in self._partitions if reader.position(tp) < targets[tp]
                ]
                if not left or time.monotonic() >= deadline:
                    break
                for records in reader.poll(timeout_ms=_POLL_MS).values():
                    for record in records:
                        self._values[record.key] = record.value
        except ClientError:
            self.close()
            raise
        if left:  # a fresh reader next time: this one may be stuck (a broker restart)
            self.close()
            raise not_read_to_end(self.topic, left, timeout)
        return self._values.get(key)

    def _reading(self) -> Any:
        if self._reader is None:
            self._ends = self._consumer("read_uncommitted")
            found = self._ends.partitions_for_topic(self.topic)
            if not found:
                self.close()
                raise ClientError(f"topic {self.topic} does not exist (run `provision`)")
            self._partitions = [TopicPartition(self.topic, p) for p in sorted(found)]
            reader = self._consumer("read_committed")
            reader.assign(self._partitions)
            reader.seek_to_beginning(*self._partitions)
            self._reader = reader
        return self._reader

    def _consumer(self, isolation: str) -> Any:
        return assigned_consumer(
            self._bootstrap, self._client_id, self._properties, isolation_level=isolation
        )

    def close(self) -> None:
        """Close both consumers (a later `latest` opens them again and reads from the start)."""
        for consumer in (self._reader, self._ends):
            if consumer is not None:
                with suppress(ClientError):
                    consumer.close()
        self._reader = self._ends = None
        self._values = {}
