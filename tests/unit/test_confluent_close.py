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

import framework.kafka.confluent as confluent_client
from router.producer import ProducerConfig
from router.producer_transport import ProducerTransport, open_transport
from sessionizer.kafka_sink import KafkaSink, open_kafka_sink


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


def stream_producer_transport() -> ProducerTransport:
    return open_transport(ProducerConfig("k:9092", "app", 4, kafka_client="confluent"), [])


def session_sink() -> KafkaSink:
    return open_kafka_sink("confluent", "k:9092", "s", "d", client_id="n1")


@pytest.mark.parametrize(
    ("module", "build"),
    [(confluent_client, stream_producer_transport), (confluent_client, session_sink)],
)
@pytest.mark.parametrize(
    ("producer", "calls"),
    [(OldProducer, ["flush", "purge"]), (NewProducer, ["flush", "purge", "close"])],
)
def test_confluent_producers_close_on_every_client_version(
    monkeypatch: pytest.MonkeyPatch,
    module: ModuleType,
    build: Callable[[], ProducerTransport | KafkaSink],
    producer: type[OldProducer],
    calls: list[str],
) -> None:
    monkeypatch.setattr(module, "Producer", producer)
    build().close()
    assert OldProducer.made[-1].calls == calls
