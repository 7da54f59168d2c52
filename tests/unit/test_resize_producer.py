"""A producer's part in a live resize (docs/resize.md): markers on the old streams, then M.

No servers: each transport the producer opens is a `RecordingTransport`, the registry a
fake with the `ProducerRegistry` surface whose polls report the resize.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

import router.producer as producer_module
from framework.kernel.watermark import JOINED, Watermark
from framework.testing.producer import RecordingTransport
from router.fragment import ParsedFragment
from router.hashing import stream_for_key
from router.producer import ProducerConfig, StreamProducer
from router.producer_registry import PollResult
from router.resize import resize_of
from router.resize_wire import Epoch, ResizeMarker, decode_control
from router.wire import decode_record

EPOCH = Epoch(1, 4, 6)


@dataclass
class ResizingRegistry:
    """Reports `resize` from its first poll on; records what the producer tells it."""

    resize: Epoch | None = None
    streams: list[list[str]] = field(default_factory=list)
    producer_id: str = "me"

    def register(self) -> None:
        """Nothing to register."""

    def joined(self) -> None:
        """Nothing to record."""

    def publish(self, clock_ms: int | None, **flags: Any) -> None:
        """Nothing to record."""

    def poll(self) -> PollResult:
        return PollResult(peers=False, resize=self.resize)

    def streams_changed(self, streams: list[str]) -> None:
        self.streams.append(list(streams))

    def close(self) -> None:
        """Nothing to close."""


@pytest.fixture
def transports(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[RecordingTransport]]:
    opened: list[RecordingTransport] = []

    def open_transport(config: ProducerConfig, topics: list[str]) -> RecordingTransport:
        opened.append(RecordingTransport())
        return opened[-1]

    monkeypatch.setattr(producer_module, "open_transport", open_transport)
    yield opened


def _decoded(transport: RecordingTransport) -> list[tuple[int, Any]]:
    out = []
    for stream, key, value, stamp, headers in transport.records:
        control = decode_control(key, value, headers, stamp, 0)  # type: ignore[arg-type]
        item = control or decode_record(key, value, headers, stamp)  # type: ignore[arg-type]
        out.append((stream, item))
    return out


def _keys_moving(count: int = 200) -> tuple[str, str]:
    keys = [f"k{i}" for i in range(count)]
    moving = next(k for k in keys if stream_for_key(k, 6) != stream_for_key(k, 4))
    staying = next(k for k in keys if stream_for_key(k, 6) == stream_for_key(k, 4))
    return moving, staying


def test_a_producer_marks_every_old_stream_then_routes_by_the_new_count(
    transports: list[RecordingTransport],
) -> None:
    registry = ResizingRegistry()
    config = ProducerConfig("kafka:9092", "app", 4, producer_id="me")
    producer = StreamProducer(config, registry=registry)  # type: ignore[arg-type]
    moving, staying = _keys_moving()
    producer.send(ParsedFragment(moving, 1_000, {}))
    assert producer.config.num_streams == 4
    registry.resize = EPOCH
    producer.switch(EPOCH)
    producer.send(ParsedFragment(moving, 2_000, {}))
    producer.send(ParsedFragment(staying, 2_001, {}))
    old, new = transports
    markers = [(s, r) for s, r in _decoded(old) if isinstance(r, ResizeMarker)]
    assert sorted(s for s, _ in markers) == [0, 1, 2, 3]
    assert all(r.producer == "me" and r.epoch == EPOCH for _, r in markers)
    assert old.closed and producer.config.num_streams == 6
    decoded = _decoded(new)
    joined = sorted(s for s, r in decoded if isinstance(r, Watermark) and r.marker == JOINED)
    assert joined == [4, 5]
    sent = [(s, r.key) for s, r in decoded if isinstance(r, ParsedFragment)]
    assert sent == [(stream_for_key(moving, 6), moving), (stream_for_key(staying, 4), staying)]
    assert registry.streams == [[f"app.stream.{i:04d}" for i in range(6)]]
    producer.switch(EPOCH)  # seen again: nothing more
    assert len(transports) == 2


def test_a_producer_started_after_the_resize_only_marks_the_old_streams(
    transports: list[RecordingTransport],
) -> None:
    registry = ResizingRegistry(resize=EPOCH)
    config = ProducerConfig("kafka:9092", "app", 6, producer_id="late")
    StreamProducer(config, registry=registry)  # type: ignore[arg-type]
    (only,) = transports
    decoded = _decoded(only)
    joined = sorted(s for s, r in decoded if isinstance(r, Watermark) and r.marker == JOINED)
    markers = sorted(s for s, r in decoded if isinstance(r, ResizeMarker))
    assert joined == list(range(6)) and markers == [0, 1, 2, 3]
    first_marker = next(i for i, (_, r) in enumerate(decoded) if isinstance(r, ResizeMarker))
    assert all(isinstance(r, Watermark) for _, r in decoded[:first_marker])


def test_an_anonymous_producer_never_switches(transports: list[RecordingTransport]) -> None:
    producer = StreamProducer(ProducerConfig("kafka:9092", "app", 4))
    producer.switch(EPOCH)
    assert producer.config.num_streams == 4 and len(transports) == 1


@pytest.mark.parametrize(
    ("data", "found"),
    [
        (None, None),
        ({"count": 4}, None),
        ({"count": 6, "resize": {"epoch": 1, "from": 4, "to": 6}}, EPOCH),
        ({"count": 6, "resize": {"epoch": 1, "from": 4, "to": 4}}, None),
        ({"count": 6, "resize": {"epoch": True, "from": 4, "to": 6}}, None),
        ({"count": 6, "resize": "soon"}, None),
    ],
)
def test_the_registry_record_is_read_totally(data: dict[str, Any] | None, found: Any) -> None:
    assert resize_of(data) == found
