"""A producer transport in memory, for the tests of `router.producer.StreamProducer`."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field

import pytest

import framework.commands.produce as produce_command
import router.producer as producer_module
from framework.kafka.errors import SendFailed
from framework.kafka.producer import TopicSend
from router.errors import ProduceFailed
from router.producer import ProducerConfig, StreamProducer
from router.producer_transport import FailedSends

__all__ = ["RecordingTransport", "record_produce_command", "sent_times"]


@dataclass
class RecordingTransport:
    """Records what `StreamProducer` sends; fails (at the flush) or refuses (at the send) the
    records of the streams it is told to."""

    records: list[tuple[int, bytes | None, bytes, int, object]] = field(default_factory=list)
    fail_streams: set[int] = field(default_factory=set)
    refuse_streams: set[int] = field(default_factory=set)
    refuse_times_after: int | None = None
    """Records dated after this fail at the flush as refused for their timestamp, as a broker
    refuses one too far ahead of its clock."""
    prepared: list[bool] = field(default_factory=list)
    flushes: list[int] = field(default_factory=list)
    """How many records had been sent at each flush."""
    closed: bool = False
    _failed: list[str] = field(default_factory=list)
    _fragments_failed: int = 0
    _timestamps_refused: int = 0

    def prepare(self, *, verify: bool) -> None:
        """Remember the call."""
        self.prepared.append(verify)

    def send(
        self, stream: int, key: bytes | None, value: bytes, timestamp_ms: int, headers: object
    ) -> None:
        """Record the send; fail it at the next flush if its stream is told to fail."""
        self.records.append((stream, key, value, timestamp_ms, headers))
        after = self.refuse_times_after
        if after is not None and timestamp_ms > after:
            self._failed.append(f"stream {stream}: Broker: Invalid timestamp")
            self._fragments_failed += key is not None
            self._timestamps_refused += 1
        elif stream in self.fail_streams:
            self._failed.append(f"stream {stream}: broker said no")
            self._fragments_failed += key is not None

    def fragment_sender(self) -> TopicSend:
        """`send` without headers; a refused stream's record raises `SendFailed`."""

        def send_to(stream: int, key: bytes | None, value: bytes, timestamp_ms: int) -> None:
            if stream in self.refuse_streams:
                raise SendFailed(f"stream {stream}: too large")
            self.send(stream, key, value, timestamp_ms, None)

        return send_to

    def refused(self, stream: int, exc: SendFailed) -> ProduceFailed:
        """`ProduceFailed` naming the stream."""
        return ProduceFailed("recorded", f"cannot send to stream {stream}: {exc}")

    def flush(self, timeout: float | None) -> FailedSends:
        """The fragments failed, the failures and the timestamps refused since the last flush."""
        self.flushes.append(len(self.records))
        return self.failures()

    def failures(self) -> FailedSends:
        """What `flush` would report, without the flush."""
        failed, self._failed = self._failed, []
        fragments, self._fragments_failed = self._fragments_failed, 0
        refused, self._timestamps_refused = self._timestamps_refused, 0
        return FailedSends(fragments, failed, refused)

    def close(self, timeout: float | None = None) -> None:
        """Remember the close."""
        self.closed = True


def record_produce_command(monkeypatch: pytest.MonkeyPatch) -> RecordingTransport:
    """`sessionizer produce` in-process without a cluster: its producer (4 streams, no
    registry) sends to the returned transport, which keeps what it is given."""
    fake = RecordingTransport()
    monkeypatch.setattr(producer_module, "open_transport", lambda config, topics: fake)
    monkeypatch.setattr(
        produce_command,
        "_producer",
        lambda connection, args: nullcontext(StreamProducer(ProducerConfig("b:1", "app", 4))),
    )
    return fake


def sent_times(sent: RecordingTransport) -> list[int]:
    """The event times of the fragments sent (not the watermarks)."""
    return [timestamp for _, key, _, timestamp, _ in sent.records if key is not None]
