"""`StreamProducer` over a fake transport: records, watermarks, counters, errors, client choice."""

from __future__ import annotations

import gc
import time
import weakref
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

import router.producer as producer_module
from framework.kernel.watermark import Watermark
from framework.testing.producer import RecordingTransport
from router.errors import MalformedLine, ProduceFailed
from router.fragment import ParsedFragment
from router.generator import generate_fragments
from router.hashing import stream_for_key
from router.ingest import produce_fragments
from router.producer import CONFLUENT_QUEUE_MESSAGES, ProducerConfig, StreamProducer
from router.wire import decode_record, encode_fragment

STREAMS = 8
MINUTE = 60_000


@pytest.fixture
def transport(monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordingTransport]:
    fake = RecordingTransport()
    monkeypatch.setattr(producer_module, "open_transport", lambda config, topics: fake)
    yield fake


def _config(**overrides: object) -> ProducerConfig:
    return ProducerConfig("localhost:9092", "app", STREAMS, **overrides)  # type: ignore[arg-type]


def test_fragments_go_to_their_stream_with_the_wire_bytes_and_event_time(
    transport: RecordingTransport,
) -> None:
    fragments = list(generate_fragments(50, seed=3))
    with StreamProducer(_config()) as producer:
        for fragment in fragments:
            producer.send(fragment)
    assert transport.prepared == [True] and transport.closed
    sent = [r for r in transport.records if r[1] is not None]
    assert len(sent) == len(fragments) == producer.stats.sent
    for fragment, (stream, key, value, timestamp, headers) in zip(fragments, sent, strict=True):
        assert stream == stream_for_key(fragment.key, STREAMS)
        assert (key, value) == encode_fragment(fragment)
        assert timestamp == fragment.timestamp_ms and headers is None
        assert decode_record(key, value, headers, timestamp) == fragment


def test_watermarks_are_wire_watermarks_at_the_clock_to_lagging_streams_only(
    transport: RecordingTransport,
) -> None:
    # Stream of "a" gets a fragment every 10 s for 10 minutes; every other stream idles.
    busy = stream_for_key("a", STREAMS)
    with StreamProducer(_config(watermark_interval_ms=MINUTE)) as producer:
        for t in range(0, 600_001, 10_000):
            producer.send(ParsedFragment("a", 1_000_000 + t, {"n": t}))
        producer.end_of_input()
    marks = [r for r in transport.records if r[1] is None]
    decoded = [decode_record(None, value, headers, ts) for _, _, value, ts, headers in marks]
    assert all(isinstance(w, Watermark) for w in decoded)
    assert all(stream != busy for stream, *_ in marks[:-STREAMS])
    regular = [(s, w.timestamp_ms) for (s, *_), w in zip(marks, decoded, strict=True) if not w.end]
    idle = [s for s in range(STREAMS) if s != busy]
    expected_times = range(1_070_000, 1_600_001, 70_000)
    assert sorted(regular) == sorted((s, t) for t in expected_times for s in idle)
    ends = decoded[-STREAMS:]
    assert ends == [Watermark(1_600_000, end=True)] * STREAMS
    assert producer.stats.watermarks == len(marks)


def test_a_failed_fragment_is_not_counted_sent_and_flush_raises(
    transport: RecordingTransport,
) -> None:
    fragments = list(generate_fragments(40, seed=5))
    transport.fail_streams = {stream_for_key(fragments[0].key, STREAMS)}
    failing = sum(stream_for_key(f.key, STREAMS) in transport.fail_streams for f in fragments)
    producer = StreamProducer(_config())
    for fragment in fragments:
        producer.send(fragment)
    with pytest.raises(ProduceFailed, match="sends failed"):
        producer.flush()
    assert producer.stats.sent == len(fragments) - failing


def test_a_failed_delivery_raises_from_a_later_send_without_waiting_for_a_flush(
    transport: RecordingTransport,
) -> None:
    # An endless input (`sessionizer produce -` of a live log) never flushes: a failure
    # must still come out, at the producer's next look at its deliveries.
    fragments = [ParsedFragment(f"k{i}", 1_000 + i, {"n": i}) for i in range(2_000)]
    first = next(i for i, f in enumerate(fragments) if stream_for_key(f.key, STREAMS) == 0)
    transport.fail_streams = {0}
    producer = StreamProducer(_config())
    with pytest.raises(ProduceFailed, match="sends failed"):
        for fragment in fragments:
            producer.send(fragment)
    queued = [r for r in transport.records if r[1] is not None]
    assert first < len(queued) <= first + 1 + producer_module._POLL_EVERY
    assert transport.flushes == []  # raised by a send, not by a flush
    producer.flush()  # reported once: the flush has nothing more
    assert producer.stats.sent == len(queued) - sum(r[0] == 0 for r in queued)


def test_poll_raises_a_failed_delivery_while_no_fragment_is_sent(
    transport: RecordingTransport,
) -> None:
    # A quiet input sends nothing: `poll` (called by `sessionizer produce` while it waits
    # for lines) is what still reports the failure.
    fragments = [ParsedFragment(f"k{i}", 1_000 + i, {"n": i}) for i in range(50)]
    transport.fail_streams = {0}
    producer = StreamProducer(_config())
    for fragment in fragments:  # fewer than a look's worth: no send reports it
        producer.send(fragment)
    with pytest.raises(ProduceFailed, match="sends failed"):
        producer.poll()
    producer.poll()  # reported once
    producer.flush()
    failed = sum(stream_for_key(f.key, STREAMS) == 0 for f in fragments)
    assert failed and producer.stats.sent == len(fragments) - failed


def test_a_fragment_refused_before_queueing_raises_produce_failed_and_is_not_counted(
    transport: RecordingTransport,
) -> None:
    refused = ParsedFragment("refused", 1_000, {"n": 1})
    transport.refuse_streams = {stream_for_key(refused.key, STREAMS)}
    producer = StreamProducer(_config())
    with pytest.raises(ProduceFailed, match="too large"):
        producer.send(refused)
    with pytest.raises(ProduceFailed, match="too large"):
        producer.send_encoded(producer.encode(refused))
    producer.flush()
    assert producer.stats.sent == 0 and not [r for r in transport.records if r[1] is not None]


def test_a_fragment_dated_past_the_brokers_bound_is_rejected_before_it_is_sent(
    transport: RecordingTransport,
) -> None:
    # Kafka 4 brokers refuse a record dated more than an hour ahead of their clock, and every
    # record of its batch with it: such a line is rejected here, as one that does not parse.
    now = int(time.time() * 1000)
    fragments = [ParsedFragment(f"k{i}", now - 1_000 * i, {"n": i}) for i in range(5)]
    ahead = ParsedFragment("k9", now + 2 * 3_600_000, {"n": 9})
    producer = StreamProducer(_config())
    with pytest.raises(MalformedLine, match="dated-ahead"):
        producer.send(ahead)
    stats = produce_fragments(producer, [*fragments[:2], ahead, *fragments[2:]])
    assert stats.as_dict() == {
        "read": 6, "parsed": 5, "rejected": 1, "sent": 5, "reasons": {"dated-ahead": 1},
    }  # fmt: skip
    assert [t for _, key, _, t, _ in transport.records if key is not None] == [
        f.timestamp_ms for f in fragments
    ]
    assert producer._policy.clock_ms == now  # the watermarks never saw it
    unbounded = StreamProducer(_config(max_ahead_ms=None))
    unbounded.send(ahead)
    assert transport.records[-1][3] == ahead.timestamp_ms


def test_a_timestamp_the_broker_refused_fails_the_flush_saying_why(
    transport: RecordingTransport,
) -> None:
    transport.refuse_times_after = 9_500
    producer = StreamProducer(_config(max_ahead_ms=None))
    for i in range(3):
        producer.send(ParsedFragment(f"k{i}", 9_000 + 1_000 * i, {"n": i}))
    with pytest.raises(ProduceFailed, match=r"message\.timestamp\.after\.max\.ms") as caught:
        producer.flush()
    assert "2 sends failed, 2 refused for their timestamp" in str(caught.value)
    assert "brokers are up" not in str(caught.value)  # not the generic hint
    assert "message.timestamp.before.max.ms" in str(caught.value)  # or too far behind
    assert producer.stats.sent == 1


def test_ingest_counts_and_rejects_through_either_entry_point(
    transport: RecordingTransport,
) -> None:
    good = ParsedFragment("k", 1_000, {"a": 1})
    bad = ParsedFragment("k", 2_000, {1: "not a string name"})  # type: ignore[dict-item]
    producer = StreamProducer(_config())
    with pytest.raises(MalformedLine):
        producer.encode(bad)
    stats = produce_fragments(producer, [good, bad, good], end_of_input=True)
    assert stats.as_dict() == {
        "read": 3, "parsed": 2, "rejected": 1, "sent": 2, "reasons": {"unencodable": 1},
    }  # fmt: skip


def test_the_config_names_a_client_and_carries_the_same_settings_for_both() -> None:
    config = _config(kafka_client="confluent", kafka_config={"security.protocol": "SSL"})
    settings = config.confluent_settings()
    assert settings["acks"] == "all" and settings["enable.idempotence"] is True
    assert settings["linger.ms"] == config.linger_ms and settings["batch.size"] == config.batch_size
    assert settings["compression.type"] == "lz4" and settings["security.protocol"] == "SSL"
    assert config.kafka_settings()["security_protocol"] == "SSL"
    with pytest.raises(ValueError, match="transport"):
        _config(kafka_client="librdkafka")


def test_librdkafka_may_queue_a_million_records_unless_the_kafka_config_says_otherwise() -> None:
    assert CONFLUENT_QUEUE_MESSAGES == 1_000_000
    settings = _config(kafka_client="confluent").confluent_settings()
    assert settings["queue.buffering.max.messages"] == CONFLUENT_QUEUE_MESSAGES
    assert "queue.buffering.max.kbytes" not in settings  # librdkafka's bound on bytes stays
    told = _config(kafka_config={"queue.buffering.max.messages": "5000"}).confluent_settings()
    assert told["queue.buffering.max.messages"] == "5000"


@pytest.mark.parametrize(
    ("choice", "expected"),
    [("kafka-python", "KafkaPythonProducer"), ("confluent", "ConfluentProducer")],
)
def test_the_transport_follows_the_configured_client(
    monkeypatch: pytest.MonkeyPatch, choice: str, expected: str
) -> None:
    import framework.kafka.confluent as confluent
    import framework.kafka.kafka_python as kafka_python
    import router.producer_transport as transports

    made: list[str] = []
    fake = SimpleNamespace(send=None)  # a producer the transport only holds
    for module, name in ((kafka_python, "KafkaPythonProducer"), (confluent, "ConfluentProducer")):
        monkeypatch.setattr(module, name, lambda settings, name=name: made.append(name) or fake)
    transports.open_transport(_config(kafka_client=choice), ["app.stream.0000"])
    assert made == [expected]


def test_the_end_of_input_is_written_once_every_fragment_is_acknowledged(
    transport: RecordingTransport,
) -> None:
    # Another stream's owner may forward this end to the streams a live resize moved keys to
    # (docs/resize.md); sent beside fragments still in flight, it overtook some of them
    # there, and the new stream closed its sessions early (the chaos test with a resize).
    fragments = list(generate_fragments(30, seed=5))
    with StreamProducer(_config()) as producer:
        for fragment in fragments:
            producer.send(fragment)
        producer.end_of_input()
    decoded = [decode_record(key, value, headers, stamp) for _, key, value, stamp, headers in
               transport.records]  # fmt: skip
    ends = [i for i, record in enumerate(decoded) if isinstance(record, Watermark) and record.end]
    assert len(ends) == STREAMS and ends[-1] == len(decoded) - 1
    assert sum(isinstance(r, ParsedFragment) for r in decoded[: ends[0]]) == len(fragments)
    assert ends[0] in transport.flushes, (ends[0], transport.flushes)


def test_a_producer_let_go_is_freed_at_once_not_left_to_the_collector(
    transport: RecordingTransport,
) -> None:
    # Its client is released with it: no reference cycle may wait for the cyclic collector.
    producer = StreamProducer(_config(producer_id="p1"), registry=None)
    producer.send(ParsedFragment("k", 1_000, {}))
    gone = weakref.ref(producer)
    gc.disable()
    try:
        del producer
        assert gone() is None
    finally:
        gc.enable()
