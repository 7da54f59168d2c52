"""A keyed one-partition log (the handover topic): write many records at once, read them back.

`open_keyed_log` is the one place its client is chosen (the `KafkaClient`
choice of `framework.kernel.transport`). `write_many` sends every record to
partition 0, then waits once (at most its timeout) for the acknowledgement of
all in-sync replicas, returning each record's offset or an `Unwritten` saying
why it has none; `read_many` reads the records at some offsets with a reader
kept for all reads (one consumer start-up per node, not one per read), forward
from the first in one pass (`ForwardRead`), and gives up at its deadline.
`open` creates the producer and the reader in the background, so the first
write or read pays no client start-up; otherwise that first call creates them.
Failures are `ClientError`s (`framework.kafka.errors`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from framework.kafka.errors import ClientError
from framework.kernel.transport import resolve_transport

__all__ = ["ForwardRead", "KeyedLog", "KeyedLogBase", "Unwritten", "open_keyed_log"]


@dataclass(frozen=True)
class Unwritten:
    """Why a record has no offset: `why` reads after "record", e.g. "refused by T (...)"."""

    why: str


Found = tuple[int, bytes | None, bytes | None]
"""A record read back: (its offset, key, value)."""


class KeyedLog(Protocol):
    """A one-partition topic that records are written to in batches and read back by offset."""

    topic: str

    def open(self, timeout: float) -> None:
        """Start the producer and the reader in the background (failures wait for their use)."""

    def write_many(
        self, records: Sequence[tuple[bytes, bytes]], timeout: float
    ) -> list[int | Unwritten]:
        """Send every (key, value), flush once, then each one's offset (or why not)."""

    def read_many(self, offsets: Sequence[int], timeout: float) -> dict[int, Found]:
        """For each offset, the first record at or after it, read forward in one pass (a
        seek only past long gaps); those not found within `timeout` are left out.

        Raises `ClientError` when the reader failed (the next read starts a fresh one).
        """

    def close(self) -> None:
        """Close the reader and the producer, if they were opened."""


def open_keyed_log(
    client: str,
    bootstrap: str,
    topic: str,
    *,
    client_id: str,
    properties: Mapping[str, str],
    max_request_bytes: int,
) -> KeyedLog:
    """The keyed log over the `client` choice (`auto`: confluent-kafka when installed)."""
    args = (bootstrap, topic)
    if resolve_transport(client) == "confluent":
        from framework.kafka.confluent_log import ConfluentKeyedLog

        return ConfluentKeyedLog(
            *args, client_id=client_id, properties=properties, max_request_bytes=max_request_bytes
        )
    from framework.kafka.kafka_python_log import KafkaPythonKeyedLog

    return KafkaPythonKeyedLog(
        *args, client_id=client_id, properties=properties, max_request_bytes=max_request_bytes
    )


class KeyedLogBase:
    """What both clients' logs share: where they write, their background start, and their
    producer and reader, each made at its first use and kept until `close`."""

    # The reader, kept between reads; set on the instance when first made.
    _reader: Any = None

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        *,
        client_id: str,
        properties: Mapping[str, str],
        max_request_bytes: int,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.client_id = client_id
        self.properties = dict(properties)
        self.max_request_bytes = max_request_bytes
        self._producer: Any = None
        self._lock = threading.Lock()  # the warm-up thread and the loop may both open clients
        self._closed = False

    def open(self, timeout: float) -> None:
        """Start the producer and the reader, and learn the topic's metadata, in the background.

        Called when the node starts (without delaying it), so a planned move pays neither
        the clients' start-up nor the first metadata round trip.  A failure here is not
        final: the first write or read opens its client again if need be, and reports
        what fails.
        """
        thread = threading.Thread(
            target=self._warm, args=(timeout,), name=f"{self.client_id}-handover-open", daemon=True
        )
        thread.start()

    def _warm(self, timeout: float) -> None:
        raise NotImplementedError

    def _kept_producer(self, make: Callable[[], Any]) -> Any:
        """The producer, made by `make` at the first call (the warm-up thread or a write)."""
        with self._lock:
            if self._closed:
                raise ClientError(f"topic {self.topic}: its producer is closed")
            if self._producer is None:
                self._producer = make()
            return self._producer

    def _kept_reader(self, make: Callable[[], Any]) -> Any:
        """The reader, made by `make` at the first call (the warm-up thread or a read)."""
        with self._lock:  # made by the warm-up thread or the loop, then used by the loop only
            if self._closed:
                raise ClientError(f"record unreadable: the reader of {self.topic} is closed")
            if self._reader is None:
                self._reader = make()
            return self._reader


SEEK_PAST: Final = 256
"""Records between two wanted offsets beyond which a pass seeks rather than reads on."""


class ForwardRead:
    """One pass forward through the log for some offsets: each gets the first record at or
    after it (the record itself, unless compaction removed it)."""

    def __init__(self, offsets: Sequence[int]) -> None:
        self._wanted = sorted(set(offsets))
        self._next = 0  # the first wanted offset not found yet
        self.found: dict[int, Found] = {}

    @property
    def done(self) -> bool:
        """Every wanted offset has its record."""
        return self._next >= len(self._wanted)

    @property
    def position(self) -> int:
        """Where reading goes on: the first wanted offset not found yet."""
        return self._wanted[self._next]

    def see(self, offset: int, key: bytes | None, value: bytes | None) -> None:
        """A record read: it answers every wanted offset not found yet at or before it."""
        wanted = self._wanted
        while self._next < len(wanted) and wanted[self._next] <= offset:
            self.found[wanted[self._next]] = (offset, key, value)
            self._next += 1

    def seek_from(self, offset: int) -> int | None:
        """Where to seek after reading up to `offset`: the next wanted offset when it lies
        more than `SEEK_PAST` records ahead (None: read on)."""
        if self.done or self.position - offset <= SEEK_PAST:
            return None
        return self.position


def late(timeout: float) -> Unwritten:
    """A record not acknowledged within the write's timeout."""
    return Unwritten(f"not acknowledged in {timeout:g} s")
