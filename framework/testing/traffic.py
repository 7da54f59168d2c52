"""`SteadyTraffic`: fragments written at a steady rate from a thread, for tests and benchmarks."""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager

from framework.kernel.config import ConnectionConfig
from framework.kernel.errors import ClusterError, InvalidArgument
from router.fragment import ParsedFragment
from router.hashing import hash64, stream_for_key
from router.ingest import produce_fragments
from router.producer import ProducerConfig, StreamProducer

__all__ = ["SteadyTraffic", "produce", "skewed"]

# Cold keys are sampled by a second hash of the key, in steps of 1/_SAMPLE_STEPS.
_SAMPLE_STEPS = 1 << 20

_TICK_S = 0.1  # seconds of traffic per batch: a rate, not a wait for anything


def produce(
    connection: ConnectionConfig,
    streams: int,
    fragments: Iterable[ParsedFragment],
    *,
    end: bool = False,
) -> None:
    """Send `fragments` to the app's `streams` streams with one `StreamProducer`; with `end`,
    then the end-of-input watermarks."""
    with StreamProducer(ProducerConfig(connection.bootstrap, connection.app, streams)) as producer:
        produce_fragments(producer, fragments, end_of_input=end)


def skewed(
    fragments: list[ParsedFragment], streams: int, hot: Collection[int], share: float
) -> list[ParsedFragment]:
    """Every fragment of the `hot` streams and of a sample of the other keys, so the hot
    streams carry `share` of the result in every stretch of it; order kept.

    The cold keys are sampled by a hash of the key (whole keys, so no session loses a
    fragment), not by first appearance: generated keys appear in time order, and a
    first-seen pick would put all the cold traffic at the start.
    """
    if not 0 < share < 1:
        raise InvalidArgument(f"the hot share must be in (0, 1), got {share}")
    keys = {f.key for f in fragments}
    hot_keys = {k for k in keys if stream_for_key(k, streams) in hot}
    hot_count = sum(1 for f in fragments if f.key in hot_keys)
    cold_count = len(fragments) - hot_count
    wanted = hot_count * (1 - share) / share
    threshold = _SAMPLE_STEPS if cold_count <= wanted else int(_SAMPLE_STEPS * wanted / cold_count)
    # Salted, so the sample is independent of the routing hash that made the key cold.
    kept = hot_keys | {
        k for k in keys - hot_keys if hash64("sample|" + k) % _SAMPLE_STEPS < threshold
    }
    return [f for f in fragments if f.key in kept]


class SteadyTraffic:
    """Writes `fragments` at `rate` per second to `streams` streams until stopped or out of them.

    Behind schedule (a slow send), it catches up, so the mean rate holds. Ends with
    the end-of-input watermark. Use `running()` as a context manager.
    """

    def __init__(
        self,
        connection: ConnectionConfig,
        streams: int,
        fragments: list[ParsedFragment],
        rate: float,
    ) -> None:
        self.config = ProducerConfig(connection.bootstrap, connection.app, streams)
        self.fragments = fragments
        self.rate = rate
        self.sent = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="steady-traffic", daemon=True)

    def left(self) -> int:
        """Fragments not yet sent."""
        return len(self.fragments) - self.sent

    @contextmanager
    def running(self) -> Iterator[SteadyTraffic]:
        """Run while the block runs; always stopped (with end of input) and joined after."""
        self._thread.start()
        try:
            yield self
        finally:
            self.stop()

    def stop(self, timeout: float = 120.0) -> None:
        """Stop writing, write the end-of-input watermark, wait for the thread; raise its error."""
        self._stop.set()
        self._thread.join(timeout=timeout)
        if self._thread.is_alive():
            raise TimeoutError(f"the traffic thread did not stop within {timeout:g} s")
        if self.error is not None:
            raise ClusterError(f"producing failed: {self.error!r}") from self.error

    def _run(self) -> None:
        began = time.monotonic()
        try:
            with StreamProducer(self.config) as producer:
                while not self._stop.is_set() and self.sent < len(self.fragments):
                    due = min(len(self.fragments), int((time.monotonic() - began) * self.rate))
                    for fragment in self.fragments[self.sent : due]:
                        producer.send(fragment)
                    producer.flush()
                    self.sent = max(self.sent, due)
                    self._stop.wait(_TICK_S)
                producer.end_of_input()
                producer.flush()
        except BaseException as exc:  # raised again by `stop`, on the caller's thread
            self.error = exc
