"""`StreamProducer`: routes fragments to their streams, plus watermarks, over either Kafka client.

The client is `ProducerConfig.kafka_client` (`auto`, the default, takes confluent-kafka
when it is installed; `kafka-python` is the reference): `router.producer_transport`
over the client layer's producer (`framework.kafka`). Routing, encoding
(`router.wire`), the watermark policy (`router.watermarks`) and the counters are the same for both.

With `ProducerConfig.producer_id` the producer names itself in its watermarks and
writes a `joined` marker to every stream when it starts; with a
`router.producer_registry.ProducerRegistry` it also registers in ZooKeeper,
declares producers that died without ending `left` (docs/routing.md, "Several
producers"), and follows a live resize (docs/resize.md): `resize` markers to every
old stream, then routing by the new count (`switch`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Literal, NamedTuple
from weakref import WeakMethod

import structlog

from framework.kernel.errors import InvalidSetting
from framework.kernel.limits import MAX_EVENT_TIME_MS
from framework.kernel.transport import KAFKA_CLIENTS, KafkaClient
from framework.kernel.watermark import JOINED, LEFT, Marker, Watermark
from router.errors import ProduceFailed
from router.fragment import ParsedFragment
from router.fragment_path import FragmentPath
from router.naming import stream_name
from router.producer_registry import ProducerRegistry
from router.producer_transport import open_transport
from router.resize import markers
from router.resize_wire import Epoch
from router.watermarks import DEFAULT_MAX_LEAD_MS, WatermarkPolicy
from router.wire import encode_fragment, encode_watermark, producer_problem

__all__ = [
    "CONFLUENT_QUEUE_MESSAGES",
    "DEFAULT_MAX_AHEAD_MS",
    "DEFAULT_WATERMARK_INTERVAL_MS",
    "Compression",
    "EncodedFragment",
    "ProducerConfig",
    "ProducerStats",
    "StreamProducer",
]

_log = structlog.get_logger("sessionizer.producer")
_REFUSED_HINT = (
    "the broker refused their timestamps, the event times, as too far from its own clock, and "
    "with them every record of the same batch: ahead by more than the stream topics' "
    "message.timestamp.after.max.ms (an hour by default since Kafka 4; the producer rejects "
    "such lines itself under --max-ahead, which follows that setting as read when it started, "
    "less a minute for the clocks to differ), or behind by more than "
    "message.timestamp.before.max.ms where the topics set one: correct those lines or widen "
    "the setting, then produce again"
)
Compression = Literal["gzip", "lz4", "zstd", "snappy", "none"]
DEFAULT_MAX_AHEAD_MS = 59 * 60_000
"""Kafka 4's default `message.timestamp.after.max.ms` (an hour), less a minute for the
clocks of this host and the brokers to differ."""
DEFAULT_WATERMARK_INTERVAL_MS = 5 * 60_000
"""No stream's time lags the producer's clock by more than this (docs/routing.md, "Watermarks")."""
CONFLUENT_QUEUE_MESSAGES = 1_000_000
"""Records librdkafka may hold for the brokers (its default is 100,000; its 1 GiB bound on
their bytes stays).  A full queue idles the producer until there is room; a producer that
the brokers outpace on average loses that time for good, where a longer queue would have
carried it through the pause.  With 100,000, pauses of the broker under 0.4 s filled it:
`StreamProducer` sent 172,226 fragments/s, against 246,228 with a queue that never filled
(benchmarks/HOT_PATH.md, round 22)."""
_POLL_EVERY = 256  # fragments between looks at the producer registry (itself throttled)


@dataclass(frozen=True)
class ProducerConfig:
    """How the producer batches, compresses, marks time, and which Kafka client it uses."""

    bootstrap: str
    app: str
    num_streams: int
    linger_ms: int = 20
    batch_size: int = 256 * 1024
    compression: Compression = "lz4"
    # No stream's time may lag the producer's by more than this: a stream whose own
    # latest record is further behind gets a watermark.  Event time (not the wall
    # clock) keeps replays identical.
    watermark_interval_ms: int = DEFAULT_WATERMARK_INTERVAL_MS
    max_lead_ms: int | None = DEFAULT_MAX_LEAD_MS
    """A fragment dated more than this ahead of the producer's clock moves it only once the
    next fragment confirms the jump (`router.watermarks`); None: every jump at once."""
    max_ahead_ms: int | None = DEFAULT_MAX_AHEAD_MS
    """A fragment dated more than this ahead of this host's clock is rejected as
    `dated-ahead`, not sent: brokers refuse it, and every record of its batch with it
    (`message.timestamp.after.max.ms`); None: sent whatever its time."""
    kafka_config: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Extra Kafka client properties by their standard names (security settings...), as
    `ConnectionConfig.kafka_config` (`--kafka-config`)."""
    kafka_client: KafkaClient = "auto"
    """`auto` (confluent-kafka when importable), `confluent` or `kafka-python`, as
    `ConnectionConfig.kafka_client` (`--kafka-client`)."""
    producer_id: str | None = None
    """Names this producer in its watermarks, so that several can write one stream (None:
    the anonymous producer of a stream with one producer)."""

    def __post_init__(self) -> None:
        if self.num_streams < 1:
            raise InvalidSetting(
                f"num_streams must be >= 1, got {self.num_streams}: "
                "give the stream count `sessionizer streams create --count N` recorded"
            )
        if self.watermark_interval_ms < 1:
            raise InvalidSetting(
                f"watermark_interval_ms must be >= 1, got {self.watermark_interval_ms}"
            )
        if self.max_ahead_ms is not None and self.max_ahead_ms < 0:
            raise InvalidSetting(
                f"max_ahead_ms must be >= 0 or None (no bound), got {self.max_ahead_ms}"
            )
        if self.max_lead_ms is not None and self.max_lead_ms < 1:
            raise InvalidSetting(
                f"max_lead_ms must be >= 1 or None (every jump at once), got {self.max_lead_ms}"
            )
        if self.kafka_client not in KAFKA_CLIENTS:
            raise InvalidSetting(
                f"kafka_client must be one of {', '.join(KAFKA_CLIENTS)}, got "
                f"{self.kafka_client!r}: it picks the library of the producer's transport"
            )
        if self.producer_id is not None and (problem := producer_problem(self.producer_id)):
            raise InvalidSetting(f"producer_id: {problem}")

    def kafka_settings(self) -> dict[str, object]:
        """The `KafkaProducer` settings this config stands for (the benchmark reuses them)."""
        # Imported here: a process on confluent-kafka never loads kafka-python.
        from framework.kafka.kafka_python import producer_settings

        return {
            "bootstrap_servers": self.bootstrap,
            "acks": "all",
            "enable_idempotence": True,
            "linger_ms": self.linger_ms,
            "batch_size": self.batch_size,
            "compression_type": None if self.compression == "none" else self.compression,
            "client_id": f"{self.app}-producer",
            **producer_settings(self.kafka_config),
        }

    def confluent_settings(self) -> dict[str, object]:
        """The same settings for confluent-kafka's `Producer` (the benchmark reuses them), and
        librdkafka's queue bound (`CONFLUENT_QUEUE_MESSAGES`, which `kafka_config` may set)."""
        return {
            "queue.buffering.max.messages": CONFLUENT_QUEUE_MESSAGES,
            **self.kafka_config,
            "bootstrap.servers": self.bootstrap,
            "client.id": f"{self.app}-producer",
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": self.linger_ms,
            "batch.size": self.batch_size,
            "compression.type": self.compression,
        }


class EncodedFragment(NamedTuple):
    """A fragment ready to send: its stream index and record bytes."""

    stream: int
    key: bytes
    value: bytes
    timestamp_ms: int


@dataclass
class ProducerStats:
    """What the thesis counted: lines read, parsed, rejected (by reason) and sent."""

    read: int = 0
    parsed: int = 0
    rejected: int = 0
    sent: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    watermarks: int = 0
    """Watermark records written (not part of `produce --json`)."""

    def reject(self, reason: str) -> None:
        """Count one rejected line."""
        self.rejected += 1
        self.reasons[reason] += 1

    def as_dict(self) -> dict[str, object]:
        """The `produce --json` shape."""
        return {
            "read": self.read,
            "parsed": self.parsed,
            "rejected": self.rejected,
            "sent": self.sent,
            "reasons": dict(sorted(self.reasons.items())),
        }


class StreamProducer:
    """Sends fragments to `<app>.stream.NNNN` by the hash contract, plus watermarks.

    `sent` counts fragments the brokers acknowledged (acks=all), settled at each
    `flush()`; `flush()` raises `ProduceFailed` if any send failed, so a caller
    never reports a fragment as delivered that was not. Every stream topic's
    metadata is fetched at once when the producer starts, so the first sends do
    not wait for it one topic at a time.
    """

    send: Callable[[ParsedFragment], None]
    """Send one fragment to its stream (asynchronously; see `flush`); raises
    `MalformedLine` for a fragment that cannot be encoded.  It is `FragmentPath.send`
    itself (`router.fragment_path`, compiled on the hot path): no frame of the producer's
    own."""

    def __init__(
        self,
        config: ProducerConfig,
        *,
        verify: bool = True,
        registry: ProducerRegistry | None = None,
    ) -> None:
        self.config = config
        self.stats = ProducerStats()
        topics = [stream_name(config.app, i) for i in range(config.num_streams)]
        named = config.producer_id is not None
        self._policy = WatermarkPolicy(
            config.num_streams,
            config.watermark_interval_ms,
            announce_start=named,
            max_lead_ms=config.max_lead_ms,
        )
        self._registry = registry if named else None
        self._done = False  # a named producer wrote its end of input or its own `left`
        self._verify = verify
        self._resized = 0  # the latest resize epoch this producer follows
        self._resize: Epoch | None = None  # the latest the registry recorded
        self._joined = False
        self._transport = open_transport(config, topics)
        try:
            self._transport.prepare(verify=verify)
        except BaseException:
            self._transport.close(timeout=0)
            raise
        self._send = self._transport.send
        self._path = self._fragment_path(config.num_streams)
        if named:
            try:
                self._join()
            except BaseException:
                self._transport.close(timeout=0)
                raise

    def encode(self, fragment: ParsedFragment) -> EncodedFragment:
        """Route and encode a fragment; raises `MalformedLine` ("unencodable", "dated-ahead")."""
        self._path.admit(fragment.timestamp_ms)
        key, value = encode_fragment(fragment)
        return EncodedFragment(self._path.route(fragment.key), key, value, fragment.timestamp_ms)

    def send_encoded(self, fragment: EncodedFragment) -> None:
        """Send a fragment `encode` prepared."""
        self._path.queue(*fragment)

    def _fragment_path(self, num_streams: int) -> FragmentPath:
        """The per-fragment path over the current transport and policy; `send` is its `send`."""
        transport = self._transport
        path = FragmentPath(
            num_streams,
            transport.fragment_sender(),
            self._policy,
            transport.refused,
            _weakly(self._watermark_lagging),
            on_poll=_weakly(self.poll),
            poll_every=_POLL_EVERY,
            max_ahead_ms=self.config.max_ahead_ms,
        )
        self.send = path.send
        return path

    def _watermark_lagging(self, streams: Sequence[int]) -> None:
        """A watermark at the clock to the streams the policy found lagging."""
        self.send_watermark(self._policy.clock_ms, streams=streams)

    def send_watermark(
        self,
        timestamp_ms: int,
        *,
        end: bool = False,
        streams: Iterable[int] | None = None,
        producer: str | None = None,
        marker: Marker | None = None,
    ) -> None:
        """Write a watermark record to the given streams (default: every stream).

        It names this producer, or `producer` (a `left` marker names the dead one).
        """
        named = producer if producer is not None else self.config.producer_id
        value, headers = encode_watermark(Watermark(timestamp_ms, end, None, named, marker))
        send = self._send
        targets = range(self.config.num_streams) if streams is None else streams
        for stream in targets:
            send(stream, None, value, timestamp_ms, headers)
            self.stats.watermarks += 1

    def end_of_input(self) -> None:
        """Mark the end of bounded input on every stream and wait for delivery.

        With several producers, a stream's input ends when every live producer of it ended.
        Every fragment is acknowledged before the end is sent: during a live resize an old
        stream's owner forwards an end it reads to the new streams, and there it must not
        overtake this producer's last fragments (docs/resize.md).
        """
        self.flush()
        self.send_watermark(max(self._policy.clock_ms, 0), end=True)
        self._done = True
        self.flush()
        if self._registry is not None:
            self._registry.publish(self._clock(), ended=True)

    def declare_left(self, producer_id: str, clock_ms: int, streams: Iterable[str]) -> None:
        """Write a `left` marker for a producer that died without ending, to its streams."""
        indices = {stream_name(self.config.app, i): i for i in range(self.config.num_streams)}
        targets = sorted({indices[name] for name in streams if name in indices})
        clock = min(max(clock_ms, 0), MAX_EVENT_TIME_MS)
        self.send_watermark(clock, streams=targets, producer=producer_id, marker=LEFT)
        _log.warning("producer_declared_left", producer=producer_id, streams=len(targets))

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every record is acknowledged; raise `ProduceFailed` if any failed."""
        failed, failures, refused = self._transport.flush(timeout)
        self.stats.sent += self._path.unsettled - failed
        self._path.unsettled = 0
        if failures:
            raise self._failed(failures, refused)

    def poll(self) -> None:
        """Raise `ProduceFailed` for a delivery already known to have failed, and (a named
        producer) follow the registry: a live resize, a peer that died.

        Sends call it every 256 fragments; call it about once a second while your input is
        idle (`sessionizer produce` does: `router.line_input`), or a quiet producer reports
        nothing and holds up a live resize until its next lines.
        """
        failed, failures, refused = self._transport.failures()
        if failures:
            self._path.unsettled -= failed  # not sent, and not reported again by `flush`
            raise self._failed(failures, refused)
        if self._registry is not None:
            self._check_producers()

    def _failed(self, failures: Sequence[str], refused: int) -> ProduceFailed:
        """The error for failed deliveries (naming the broker's timestamp bound if it was that)."""
        if refused:
            detail = f"{len(failures)} sends failed, {refused} refused for their timestamp"
            return ProduceFailed(self.config.app, f"{detail}: {failures[:3]}", _REFUSED_HINT)
        return ProduceFailed(self.config.app, f"{len(failures)} sends failed: {failures[:3]}")

    def close(self) -> None:
        """Flush and close the underlying producer (and leave the registry).

        A named producer that did not end its input writes a `left` marker for itself
        first: its streams stop waiting for it, and their input goes on.
        """
        try:
            if self.config.producer_id is not None and not self._done:
                self._done = True
                self.send_watermark(max(self._policy.clock_ms, 0), marker=LEFT)
                if self._registry is not None:
                    self._registry.publish(self._clock(), left=True)
            self.flush()
        finally:
            self._transport.close()
            if self._registry is not None:
                self._registry.close()

    def __enter__(self) -> StreamProducer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
        else:
            self._transport.close(timeout=5)
            if self._registry is not None:
                self._registry.close()  # the znode goes; survivors declare us left

    def switch(self, epoch: Epoch) -> None:
        """Route by `epoch.new` from now on (docs/resize.md): a `resize` marker to every old
        stream, flushed, then a client for the new topics and a `joined` marker on the new
        streams.  A producer already routing by `epoch.new` only writes its markers."""
        producer_id, count = self.config.producer_id, self.config.num_streams
        if producer_id is None or epoch.epoch <= self._resized:
            return
        if count not in (epoch.old, epoch.new):
            return
        self._resized = epoch.epoch
        clock = max(self._policy.clock_ms, 0)
        if count == epoch.old:  # the old streams are this producer's streams 0..old-1
            for index, key, value, headers, stamp in markers(epoch, producer_id, clock):
                self._send(index, key, value, stamp, headers)
            self.flush()
            self._reroute(epoch.new)
            self.send_watermark(clock, streams=range(epoch.old, epoch.new), marker=JOINED)
        else:  # it started after the resize: the old streams learn it routes by the new count
            for index, key, value, headers, stamp in markers(epoch, producer_id, clock):
                self._send(index, key, value, stamp, headers)
        self.flush()
        _log.info("producer_resized", producer=producer_id, epoch=epoch.epoch, streams=epoch.new)

    def _reroute(self, count: int) -> None:
        """A transport, watermark policy and routes for `count` streams (after the flush)."""
        config = replace(self.config, num_streams=count)
        topics = [stream_name(config.app, i) for i in range(count)]
        transport = open_transport(config, topics)
        try:
            transport.prepare(verify=self._verify)
        except BaseException:
            transport.close(timeout=0)
            raise
        self._transport.close()
        self.config, self._transport, self._send = config, transport, transport.send
        policy = WatermarkPolicy(
            count, config.watermark_interval_ms, announce_start=True, max_lead_ms=config.max_lead_ms
        )
        policy.fragments_count = self._policy.fragments_count
        if self._policy.clock_ms >= 0:
            policy.fragment(0, self._policy.clock_ms)  # starts every stream at the clock
        self._policy = policy
        self._path = self._fragment_path(count)  # after the flush: nothing unsettled
        if self._registry is not None:
            self._registry.streams_changed(topics)

    def _join(self) -> None:
        """Register (if a registry is given), then write our `joined` marker to every stream."""
        if self._registry is not None:
            self._registry.register()
            self._check_producers()
        self.send_watermark(max(self._policy.clock_ms, 0), marker=JOINED)
        self.flush()
        if self._registry is not None:
            self._registry.joined()
        self._joined = True
        if self._resize is not None:
            self.switch(self._resize)

    def _check_producers(self) -> None:
        """Look at the registry: peers change the watermark policy; the dead get `left`."""
        registry = self._registry
        assert registry is not None
        seen = registry.poll()
        # Alone, a fragment moves a stream's time; with peers only our watermarks move
        # our clock on a stream, so every stream gets one per interval.
        self._policy.fragments_count = not seen.peers
        for gone in seen.gone:
            self.declare_left(gone.producer_id, gone.clock_ms, gone.streams)
        if seen.rejoin:
            self.send_watermark(max(self._policy.clock_ms, 0), marker=JOINED)
        registry.publish(self._clock())
        self._resize = seen.resize
        if seen.resize is not None and self._joined:  # (before that, `_join` switches)
            self.switch(seen.resize)

    def _clock(self) -> int | None:
        return self._policy.clock_ms if self._policy.clock_ms >= 0 else None


def _weakly(method: Callable[..., None]) -> Callable[..., None]:
    """`method`, called through a weak reference to its producer.

    The producer holds its `FragmentPath` (`send` is the path's); a path holding the
    producer's methods would make a cycle, and a producer let go without `close()` would
    keep its client until the cyclic collector ran.
    """
    ref = WeakMethod(method)

    def call(*args: object) -> None:
        bound = ref()
        if bound is not None:  # else the producer, and so this path, are being freed
            bound(*args)

    return call
