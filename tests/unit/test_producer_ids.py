"""A named producer: `joined` markers, its id in every watermark, peers, and `left` for the dead.

No servers: the Kafka transport is `framework.testing.producer.RecordingTransport`, the ZooKeeper
registry a fake with the `ProducerRegistry` surface.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import msgpack
import pytest

import router.producer as producer_module
from framework.kernel.watermark import JOINED, LEFT, Watermark
from framework.testing.producer import RecordingTransport
from router.errors import UndecodableRecord
from router.fragment import ParsedFragment
from router.hashing import stream_for_key
from router.naming import stream_name
from router.producer import ProducerConfig, StreamProducer
from router.producer_registry import GoneProducer, PollResult, default_producer_id
from router.wire import KIND_HEADER, WATERMARK_KIND, decode_record, encode_watermark

STREAMS = 4
MINUTE = 60_000


@dataclass
class FakeRegistry:
    """What `StreamProducer` asks of a `ProducerRegistry`, recorded; `results` are polled."""

    producer_id: str = "me"
    results: list[PollResult] = field(default_factory=list)
    calls: list[Any] = field(default_factory=list)

    def register(self) -> None:
        self.calls.append("register")

    def joined(self) -> None:
        self.calls.append("joined")

    def publish(
        self, clock_ms: int | None, *, ended: bool = False, left: bool = False, force: bool = False
    ) -> None:
        if ended or left:
            self.calls.append(("ended" if ended else "left", clock_ms))

    def poll(self) -> PollResult:
        return self.results.pop(0) if self.results else PollResult(peers=False)

    def close(self) -> None:
        self.calls.append("close")


@pytest.fixture
def transport(monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordingTransport]:
    fake = RecordingTransport()
    monkeypatch.setattr(producer_module, "open_transport", lambda config, topics: fake)
    yield fake


def _config(**overrides: Any) -> ProducerConfig:
    return ProducerConfig("localhost:9092", "app", STREAMS, producer_id="me", **overrides)


def _watermarks(transport: RecordingTransport) -> list[tuple[int, Watermark]]:
    decoded = []
    for stream, key, value, timestamp, headers in transport.records:
        if key is None:
            item = decode_record(None, value, headers, timestamp)  # type: ignore[arg-type]
            assert isinstance(item, Watermark)
            decoded.append((stream, item))
    return decoded


def test_a_named_producer_joins_every_stream_then_names_itself_in_every_watermark(
    transport: RecordingTransport,
) -> None:
    registry = FakeRegistry()
    producer = StreamProducer(_config(), registry=registry)  # type: ignore[arg-type]
    assert registry.calls == ["register", "joined"]
    joined = _watermarks(transport)
    assert [(s, w.marker, w.producer, w.timestamp_ms) for s, w in joined] == [
        (s, JOINED, "me", 0) for s in range(STREAMS)
    ]
    producer.send(ParsedFragment("a", 1_000_000, {}))
    producer.end_of_input()
    producer.close()
    marks = _watermarks(transport)[STREAMS:]
    # The first event time is announced on every stream, then the end of input.
    assert [(w.timestamp_ms, w.end) for _, w in marks] == [(1_000_000, False)] * STREAMS + [
        (1_000_000, True)
    ] * STREAMS
    assert {w.producer for _, w in marks} == {"me"}
    assert registry.calls[2:] == [("ended", 1_000_000), "close"]


def test_with_peers_every_stream_gets_a_watermark_each_interval_even_a_busy_one(
    transport: RecordingTransport,
) -> None:
    busy = stream_for_key("a", STREAMS)
    registry = FakeRegistry(results=[PollResult(peers=True)])
    with StreamProducer(
        _config(watermark_interval_ms=MINUTE),
        registry=registry,  # type: ignore[arg-type]
    ) as producer:
        for t in range(0, 10 * MINUTE + 1, 5_000):
            producer.send(ParsedFragment("a", 1_000_000 + t, {}))
    regular = [s for s, w in _watermarks(transport) if not w.marker]
    # Announced once, then one per interval: a busy stream is no exception with peers.
    assert regular.count(busy) >= 9
    assert all(regular.count(s) == regular.count(busy) for s in range(STREAMS))


def test_alone_a_busy_stream_gets_no_watermark_as_before(transport: RecordingTransport) -> None:
    busy = stream_for_key("a", STREAMS)
    with StreamProducer(_config(watermark_interval_ms=MINUTE), registry=FakeRegistry()) as p:  # type: ignore[arg-type]
        for t in range(0, 10 * MINUTE + 1, 5_000):
            p.send(ParsedFragment("a", 1_000_000 + t, {}))
    regular = [s for s, w in _watermarks(transport) if not w.marker]
    assert regular.count(busy) == 1  # the announcement only


def test_a_producer_gone_without_ending_gets_a_left_marker_in_its_streams(
    transport: RecordingTransport,
) -> None:
    gone = GoneProducer("dead", 1_234_000, (stream_name("app", 1), stream_name("app", 3)))
    registry = FakeRegistry(results=[PollResult(peers=True, gone=(gone,))])
    with StreamProducer(_config(), registry=registry):  # type: ignore[arg-type]
        pass
    left = [(s, w) for s, w in _watermarks(transport) if w.marker == LEFT]
    assert [(s, w.producer, w.timestamp_ms) for s, w in left] == [
        (1, "dead", 1_234_000),
        (3, "dead", 1_234_000),
    ] + [(s, "me", 0) for s in range(STREAMS)]  # and its own, as it stops without ending


def test_stopping_without_an_end_of_input_writes_our_own_left_marker_once(
    transport: RecordingTransport,
) -> None:
    registry = FakeRegistry()
    producer = StreamProducer(_config(), registry=registry)  # type: ignore[arg-type]
    producer.send(ParsedFragment("a", 1_000_000, {}))
    producer.close()
    producer.close()
    left = [(s, w.producer, w.timestamp_ms) for s, w in _watermarks(transport) if w.marker]
    assert left[STREAMS:] == [(s, "me", 1_000_000) for s in range(STREAMS)]
    assert registry.calls[2:] == [("left", 1_000_000), "close", "close"]


def test_an_anonymous_producer_writes_what_it_always_wrote(transport: RecordingTransport) -> None:
    with StreamProducer(ProducerConfig("localhost:9092", "app", STREAMS)) as producer:
        producer.send(ParsedFragment("a", 1_000_000, {}))
        producer.end_of_input()
    marks = _watermarks(transport)
    assert [(w.producer, w.marker) for _, w in marks] == [(None, None)] * STREAMS
    assert all(b"producer" not in r[2] for r in transport.records if r[1] is None)


@pytest.mark.parametrize("bad", ["", "x" * 201])
def test_a_bad_producer_id_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="producer"):
        ProducerConfig("localhost:9092", "app", STREAMS, producer_id=bad)


def test_the_default_producer_id_is_host_and_pid_in_path_safe_characters() -> None:
    name = default_producer_id()
    assert name.rsplit("-", 1)[1].isdigit()
    assert set(name) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:@+-")


def test_a_producers_watermark_and_markers_round_trip_on_the_wire() -> None:
    for marker in (None, JOINED, LEFT):
        sent = Watermark(1_000, False, None, "web-1", marker)  # type: ignore[arg-type]
        value, headers = encode_watermark(sent)
        got = decode_record(None, value, headers, 1_000, offset=7)
        assert isinstance(got, Watermark)
        assert (got.producer, got.marker, got.offset) == ("web-1", marker, 7)


@pytest.mark.parametrize(
    "body",
    [
        {"watermark": 1, "producer": ""},
        {"watermark": 1, "producer": 7},
        {"watermark": 1, "producer": "x" * 201},
        {"watermark": 1, "producer": "a", "marker": "gone"},
        {"watermark": 1, "marker": "joined"},  # a marker needs a producer
    ],
)
def test_a_malformed_producer_or_marker_is_a_bad_watermark(body: dict[str, Any]) -> None:
    with pytest.raises(UndecodableRecord) as caught:
        decode_record(None, msgpack.packb(body), [(KIND_HEADER, WATERMARK_KIND)], 1, offset=3)
    assert caught.value.reason == "bad-watermark"
