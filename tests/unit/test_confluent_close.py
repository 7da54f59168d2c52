"""confluent-kafka producers are closed on every supported client version.

`Producer.close()` is new in confluent-kafka 2.13; the project supports 2.6 and
up (Quix Streams, a benchmark peer, pins < 2.13). Both of our confluent
producers must close on either: flush, purge, then `close()` where it exists.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

import router.confluent_producer as confluent_producer
import sessionizer.confluent_sink as confluent_sink
from router.producer import ProducerConfig


class OldProducer:
    """confluent-kafka < 2.13's Producer, as far as closing goes: no `close`."""

    made: list[OldProducer] = []

    def __init__(self, settings: dict[str, Any]) -> None:
        self.calls: list[str] = []
        OldProducer.made.append(self)
        self.produce = lambda *args, **kwargs: None

    def flush(self, timeout: float = -1) -> int:
        self.calls.append("flush")
        return 0

    def purge(self) -> None:
        self.calls.append("purge")


class NewProducer(OldProducer):
    """confluent-kafka >= 2.13's Producer: `close` stops librdkafka's threads."""

    def close(self) -> None:
        self.calls.append("close")


def stream_producer_transport() -> confluent_producer.ConfluentTransport:
    return confluent_producer.ConfluentTransport(ProducerConfig("k:9092", "app", 4), [])


def session_sink() -> confluent_sink.ConfluentSink:
    return confluent_sink.ConfluentSink("k:9092", "s", "d", client_id="n1")


@pytest.mark.parametrize(
    ("module", "build"),
    [(confluent_producer, stream_producer_transport), (confluent_sink, session_sink)],
)
@pytest.mark.parametrize(
    ("producer", "calls"),
    [(OldProducer, ["flush", "purge"]), (NewProducer, ["flush", "purge", "close"])],
)
def test_confluent_producers_close_on_every_client_version(
    monkeypatch: pytest.MonkeyPatch,
    module: ModuleType,
    build: Callable[[], confluent_producer.ConfluentTransport | confluent_sink.ConfluentSink],
    producer: type[OldProducer],
    calls: list[str],
) -> None:
    monkeypatch.setattr(module, "Producer", producer)
    build().close()
    assert OldProducer.made[-1].calls == calls
