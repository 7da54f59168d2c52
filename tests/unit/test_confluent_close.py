"""confluent-kafka producers are closed on every supported client version.

`Producer.close()` is new in confluent-kafka 2.13; the project supports 2.6 and
up (Quix Streams, a benchmark peer, pins < 2.13). Both of our confluent
producers must close on either: flush, purge, then `close()` where it exists.
"""

from __future__ import annotations

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


@pytest.mark.parametrize(
    ("producer", "calls"),
    [(OldProducer, ["flush", "purge"]), (NewProducer, ["flush", "purge", "close"])],
)
def test_the_stream_producer_transport_closes(
    monkeypatch: pytest.MonkeyPatch, producer: type[OldProducer], calls: list[str]
) -> None:
    monkeypatch.setattr(confluent_producer, "Producer", producer)
    transport = confluent_producer.ConfluentTransport(ProducerConfig("k:9092", "app", 4), [])
    transport.close()
    assert OldProducer.made[-1].calls == calls


@pytest.mark.parametrize(
    ("producer", "calls"),
    [(OldProducer, ["flush", "purge"]), (NewProducer, ["flush", "purge", "close"])],
)
def test_the_session_sink_closes(
    monkeypatch: pytest.MonkeyPatch, producer: type[OldProducer], calls: list[str]
) -> None:
    monkeypatch.setattr(confluent_sink, "Producer", producer)
    sink = confluent_sink.ConfluentSink("k:9092", "s", "d", client_id="n1")
    sink.close()
    assert OldProducer.made[-1].calls == calls
