"""`FragmentPath`: what `StreamProducer` does for every fragment, in one object.

Route (the key's stream, remembered), encode (`router.wire.encode_fragment`), queue on
the client (the transport's `fragment_sender`, one call into the client), count, and
ask the watermark policy; the rare events (a stream that lags, a look at the producer
registry) go back to `StreamProducer` through the callbacks it gives.  Compiled on the
hot path (`framework.kernel.compiled.MODULES`) with the watermark policy, so that a
fragment costs the producer no interpreted frame of its own (benchmarks/HOT_PATH.md,
round 13); the `.py` file is the reference and runs on the Python path.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from framework.kafka.errors import SendFailed
from framework.kafka.producer import TopicSend
from router.errors import MalformedLine, ProduceFailed
from router.fragment import ParsedFragment
from router.hashing import stream_for_key
from router.watermarks import WatermarkPolicy
from router.wire import encode_fragment

__all__ = ["ROUTE_CACHE_SIZE", "FragmentPath"]

_NO_BOUND = 1 << 62  # `max_ahead_ms=None`: any event time is sent
ROUTE_CACHE_SIZE = 1 << 17
"""Session keys whose stream is remembered (the cache is cleared when full)."""


class FragmentPath:
    """Routes, encodes and queues fragments for one stream count; counts them, marks time."""

    def __init__(
        self,
        num_streams: int,
        sender: TopicSend,
        policy: WatermarkPolicy,
        refused: Callable[[int, SendFailed], ProduceFailed],
        on_lagging: Callable[[Sequence[int]], None],
        on_poll: Callable[[], None] | None = None,
        poll_every: int = 1,
        max_ahead_ms: int | None = None,
    ) -> None:
        self._num_streams = num_streams
        self._max_ahead = 0 if max_ahead_ms is None else max_ahead_ms
        # This host's clock plus `max_ahead_ms`, as last read: never above the real bound
        # (the clock only moves on), so a fragment below it passes with no clock read.
        self._ahead_limit = _NO_BOUND if max_ahead_ms is None else -1
        self._sender = sender
        self._refused = refused
        self._on_lagging = on_lagging
        self._routes: dict[str, int] = {}
        self.policy = policy
        """The watermark policy every queued fragment is shown to."""
        self.unsettled = 0
        """Fragments queued since the producer's last flush."""
        self._on_poll = on_poll  # every `poll_every` fragments: the producer registry's look
        self._poll_every = poll_every
        self._countdown = poll_every

    def route(self, key: str) -> int:
        """The key's stream, remembered: a session's fragments come in runs of the same key."""
        routes = self._routes
        stream = routes.get(key)
        if stream is None:
            if len(routes) >= ROUTE_CACHE_SIZE:
                routes.clear()
            stream = stream_for_key(key, self._num_streams)
            routes[key] = stream
        return stream

    def admit(self, timestamp_ms: int) -> None:
        """Raise `MalformedLine("dated-ahead")` for an event time more than `max_ahead_ms`
        ahead of this host's clock: the broker would refuse it, and every record of its batch
        with it (`message.timestamp.after.max.ms`)."""
        if timestamp_ms <= self._ahead_limit:
            return
        self._ahead_limit = int(time.time() * 1000) + self._max_ahead
        if timestamp_ms > self._ahead_limit:
            raise MalformedLine(
                "dated-ahead",
                f"event time {timestamp_ms} is more than {self._max_ahead} ms ahead of this "
                "host's clock: the brokers refuse it (message.timestamp.after.max.ms)",
            )

    def send(self, fragment: ParsedFragment) -> None:
        """Encode a fragment (`MalformedLine` if it cannot be, or is dated too far ahead of
        this host's clock), then queue it on its stream."""
        # Read once: compiled, each read of a field of the (Python) fragment is a generic
        # attribute lookup, about 160 instructions (benchmarks/HOT_PATH.md, round 22).
        timestamp_ms = fragment.timestamp_ms
        if timestamp_ms > self._ahead_limit:  # no call per fragment otherwise
            self.admit(timestamp_ms)
        key, value = encode_fragment(fragment)
        name = fragment.key
        stream = self._routes.get(name)
        if stream is None:
            stream = self.route(name)
        self.queue(stream, key, value, timestamp_ms)

    def queue(self, stream: int, key: bytes, value: bytes, timestamp_ms: int) -> None:
        """Queue an encoded fragment, then the watermarks it makes due, and the registry's look."""
        try:
            self._sender(stream, key, value, timestamp_ms)
        except SendFailed as exc:
            raise self._refused(stream, exc) from exc
        self.unsettled += 1
        lagging = self.policy.fragment(stream, timestamp_ms)
        if lagging:
            self._on_lagging(lagging)
        if self._on_poll is not None:
            self._countdown -= 1
            if self._countdown <= 0:
                self._countdown = self._poll_every
                self._on_poll()
