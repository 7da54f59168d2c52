"""The node's collaborators, as protocols: where records come from and who decides ownership.

A `Node` is a loop over four injected parts (DESIGN section 7): a
`RecordSource` (the Kafka consumer side), a `sessionizer.sinks.SessionSink`
(the producer side), a `state.store.StateStore`, and a `Coordinator` (the
balancer). The real ones are built by `framework.node.parts.connect_parts`;
the unit tests of the loop use in-process fakes of each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from balancer.config import BalancerListener
from balancer.machine import BalancerState
from framework.kernel.records import StreamRecord

__all__ = ["Coordinator", "CoordinatorFactory", "Fetched", "RecordSource", "SourceRecord"]


class SourceRecord(Protocol):
    """One record of a stream, as a Kafka client hands it out (kafka-python's field names).

    kafka-python's `ConsumerRecord` satisfies it as it comes (never wrapped: one per
    record); every other record is a `framework.kernel.records.StreamRecord`.
    """

    @property
    def topic(self) -> str:
        """The stream."""
        ...

    @property
    def offset(self) -> int:
        """Its offset in the stream."""
        ...

    @property
    def key(self) -> bytes | None:
        """The record key (the session key for fragments)."""
        ...

    @property
    def value(self) -> bytes | None:
        """The record value."""
        ...

    @property
    def timestamp(self) -> int:
        """The record timestamp in epoch milliseconds (the event time the producer set)."""
        ...

    @property
    def headers(self) -> Sequence[tuple[str, bytes]] | None:
        """The record headers."""
        ...


# The project's concrete record is one: a checked statement that it is a SourceRecord.
_STREAM_RECORD_IS_A_SOURCE_RECORD: type[SourceRecord] = StreamRecord


@dataclass(frozen=True)
class Fetched:
    """What one `RecordSource.poll` took from the client: every record, problems beside them.

    A Kafka client hands records out once: a record it returned and the caller then
    dropped is never fetched again, and the next commit moves past it. So a source
    never raises instead of returning records; what went wrong is reported here.
    """

    records: Mapping[str, Sequence[SourceRecord]] = field(default_factory=dict)
    """Per stream, the records in offset order (also those fetched beside an error)."""
    outside: Mapping[str, int] = field(default_factory=dict)
    """Streams whose read position (the value) lies outside their log: quarantine them."""
    errors: Mapping[str, str] = field(default_factory=dict)
    """Streams whose fetch failed transiently, with the error: re-read from their position."""
    error: str | None = None
    """A failure not tied to one stream (a broker away, the client's own); transient."""


class RecordSource(Protocol):
    """Reads the streams a node owns, each from a position the node chooses.

    `poll` hands out every record it took from the client and reports failures
    beside them (`Fetched`), never instead of them; it raises only on a bug.
    """

    def assign(self, positions: Mapping[str, int]) -> None:
        """Read exactly these streams from now on, each from the given offset."""
        ...

    def poll(self, timeout: float, max_records: int) -> Fetched:
        """Return the next records per stream, in offset order, waiting up to `timeout` s."""
        ...

    def bounds(self, streams: Sequence[str]) -> Mapping[str, tuple[int, int]]:
        """Return each stream's (log start offset, log end offset); raise if unknown now."""
        ...

    def ends(self, streams: Sequence[str]) -> Mapping[str, int]:
        """Each stream's log end as the consumer last saw it; no request, never blocks.

        Streams not fetched yet are left out. For figures asked every second (`/metrics`),
        which must not wait behind the fetch's long poll once per stream.
        """
        ...

    def close(self) -> None:
        """Release the client."""
        ...


class Coordinator(Protocol):
    """Decides which streams the node owns (`balancer.Balancer`); driven from the node's loop."""

    @property
    def state(self) -> BalancerState:
        """Where the coordinator is in its life."""
        ...

    @property
    def paused(self) -> bool:
        """True while the node must neither hand out records nor commit."""
        ...

    @property
    def connected(self) -> bool:
        """True while a commit now would be answered rather than wait for a reconnect."""
        ...

    def start(self) -> None:
        """Connect and start joining."""
        ...

    def poll(self, timeout: float = 0.0) -> BalancerState:
        """Apply pending events (calling the listener on this thread), waiting up to `timeout`."""
        ...

    def drain(self, seconds: float) -> None:
        """Leave the group and release streams one by one over `seconds`."""
        ...

    def close(self) -> None:
        """Release everything (after `on_revoked`, or `on_lost` where it cannot) and disconnect."""
        ...

    def report_fenced(self, stream: str) -> None:
        """A commit of `stream` was fenced or is uncertain: forget the stream and rebalance."""
        ...

    def report_load(self, fragments: Mapping[str, int], busy_seconds: float) -> None:
        """Cumulative fragments per owned stream (not replaying) and the loop's busy seconds.

        Called from the node's loop about once a second; the coordinator turns it into
        each stream's recent load and publishes it (`--balance load` plans with it).
        """
        ...

    def quarantine(self, stream: str, reason: str) -> None:
        """`stream` cannot be resumed safely: mark it for the operator, give it up for good."""
        ...


class CoordinatorFactory(Protocol):
    """Builds the coordinator for a node, given the listener it calls back."""

    def __call__(self, listener: BalancerListener) -> Coordinator:
        """Return a coordinator that calls `listener` from inside its `poll`."""
        ...
