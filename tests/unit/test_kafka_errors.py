"""The client layer maps both clients' exceptions to the project's in one place (errors.py).

Also the kafka-python producer's failure report: each send's future is kept and
checked at `flush` (no errback per send), failures carry their token and say
which ones are permanent.
"""

from __future__ import annotations

import gc
from typing import Any

import pytest
from confluent_kafka import KafkaError as ConfluentKafkaError
from confluent_kafka import KafkaException
from kafka import TopicPartition
from kafka.errors import (
    InvalidTimestampError,
    KafkaConnectionError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
    TopicAlreadyExistsError,
)
from kafka.future import Future

import framework.kafka.kafka_python as kafka_python
from framework.kafka.confluent import ConfluentProducer
from framework.kafka.errors import (
    CLIENT,
    CONFLUENT,
    FLUSHING,
    SENDING,
    ClientError,
    ClientTimeout,
    FlushIncomplete,
    PositionOutside,
    RecordTooLarge,
    SendFailed,
    TimestampRefused,
    TopicExists,
    confluent_error,
    kafka_python_error,
)


def _raised(context: Any, exc: BaseException) -> BaseException:
    with pytest.raises(BaseException) as caught, context:
        raise exc
    return caught.value


def test_kafka_python_errors_become_the_projects_with_the_original_as_cause() -> None:
    original = KafkaConnectionError("no broker at k:1")
    mapped = _raised(CLIENT, original)
    assert type(mapped) is ClientError
    assert mapped.__cause__ is original
    assert str(mapped) == str(original) and mapped.detail == repr(original)


@pytest.mark.parametrize(
    ("context", "raised", "expected"),
    [
        (SENDING, MessageSizeTooLargeError("big"), RecordTooLarge),
        (SENDING, RecordListTooLargeError("big"), RecordTooLarge),
        (SENDING, InvalidTimestampError("dated 2100"), TimestampRefused),
        (SENDING, KafkaTimeoutError("no metadata"), SendFailed),
        (FLUSHING, KafkaTimeoutError("in flight"), FlushIncomplete),
        (CLIENT, KafkaTimeoutError("slow"), ClientTimeout),
        (CLIENT, TopicAlreadyExistsError("there"), TopicExists),
        (CLIENT, KafkaConnectionError("refused"), ClientError),
    ],
)
def test_each_kafka_python_error_has_its_class(
    context: Any, raised: BaseException, expected: type[ClientError]
) -> None:
    assert type(_raised(context, raised)) is expected


def test_an_out_of_range_position_names_its_topics() -> None:
    raised = OffsetOutOfRangeError({TopicPartition("a.stream.0001", 0): 7})
    mapped = _raised(CLIENT, raised)
    assert isinstance(mapped, PositionOutside)
    assert mapped.positions == {"a.stream.0001": 7}
    unnamed = _raised(CLIENT, OffsetOutOfRangeError("somewhere"))
    assert isinstance(unnamed, PositionOutside) and unnamed.positions == {}


def test_other_exceptions_pass_through_unchanged() -> None:
    for context in (CLIENT, SENDING, FLUSHING, CONFLUENT):
        original = KeyError("a bug of ours, or the client's own lookup")
        assert _raised(context, original) is original
    assert kafka_python_error(ValueError("x")) is None
    assert confluent_error(ValueError("x")) is None


def test_confluent_errors_become_the_projects() -> None:
    too_large = KafkaException(ConfluentKafkaError(ConfluentKafkaError.MSG_SIZE_TOO_LARGE))
    assert type(_raised(CONFLUENT, too_large)) is RecordTooLarge
    exists = KafkaException(ConfluentKafkaError(ConfluentKafkaError.TOPIC_ALREADY_EXISTS))
    assert type(_raised(CONFLUENT, exists)) is TopicExists
    timed_out = KafkaException(ConfluentKafkaError(ConfluentKafkaError._TIMED_OUT))
    assert type(_raised(CONFLUENT, timed_out)) is ClientTimeout
    assert type(_raised(CONFLUENT, BufferError("Local: Queue full"))) is SendFailed
    other = KafkaException(ConfluentKafkaError(ConfluentKafkaError._TRANSPORT))
    assert type(_raised(CONFLUENT, other)) is ClientError
    refused = KafkaException(ConfluentKafkaError(ConfluentKafkaError.INVALID_TIMESTAMP))
    assert type(_raised(CONFLUENT, refused)) is TimestampRefused


def test_a_refused_timestamp_is_a_permanent_failure_of_either_client(
    producer: kafka_python.KafkaPythonProducer,
) -> None:
    fake: Any = producer._producer
    producer.send("app.stream.0001", b"k", b"v", token="dated 2100")
    fake.futures[0].failure(InvalidTimestampError("timestamp out of range"))
    (failure,) = producer.flush(1.0)
    assert failure.timestamp_refused and not failure.too_large and failure.token == "dated 2100"
    # librdkafka's delivery report (no broker needed: the callback is called as it would be).
    confluent = ConfluentProducer({"bootstrap.servers": "127.0.0.1:1"})
    try:
        message = _Message("app.stream.0002", b"k")
        for token, code in (("t", ConfluentKafkaError.INVALID_TIMESTAMP),
                            ("u", ConfluentKafkaError._MSG_TIMED_OUT)):  # fmt: skip
            confluent._token_delivered(token, ConfluentKafkaError(code), message)
        refused, expired = confluent.flush(1.0)
    finally:
        confluent.close(0)
    assert refused.timestamp_refused and not refused.too_large and refused.token == "t"
    assert not expired.timestamp_refused and expired.token == "u"


def test_failures_are_taken_as_soon_as_seen_and_reported_once(
    producer: kafka_python.KafkaPythonProducer,
) -> None:
    lost, ok, later = _sent(producer, "app.stream.0000", "lost", "ok", "later")
    lost.failure(KafkaTimeoutError("expired"))
    ok.success(None)
    assert [f.token for f in producer.take_failures()] == ["lost"]
    assert producer.take_failures() == []
    later.failure(KafkaTimeoutError("expired"))
    assert [f.token for f in producer.flush(1.0)] == ["later"]  # "lost" not again
    confluent = ConfluentProducer({"bootstrap.servers": "127.0.0.1:1"})
    try:
        message = _Message("app.stream.0000", b"k")
        confluent._token_delivered(
            "t", ConfluentKafkaError(ConfluentKafkaError._MSG_TIMED_OUT), message
        )
        assert [f.token for f in confluent.take_failures()] == ["t"]
        assert confluent.flush(1.0) == []
    finally:
        confluent.close(0)


class _Message:
    """What a confluent delivery report hands over: the record's topic and key."""

    def __init__(self, topic: str, key: bytes | None) -> None:
        self._topic, self._key = topic, key

    def topic(self) -> str:
        return self._topic

    def key(self) -> bytes | None:
        return self._key


class _FakeProducer:
    """`KafkaProducer`'s send/flush: futures settled by the test, flush may time out."""

    def __init__(self, **settings: Any) -> None:
        self.futures: list[Future] = []
        self.flush_error: BaseException | None = None
        self.refuse: BaseException | None = None
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def send(  # kafka-python's signature: the layer passes some of it by position
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        headers: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> Future:
        if self.refuse is not None:
            raise self.refuse
        fields = {"value": value, "key": key, "headers": headers, "partition": partition,
                  "timestamp_ms": timestamp_ms}  # fmt: skip
        self.sent.append((topic, fields))
        self.futures.append(Future())
        return self.futures[-1]

    def flush(self, timeout: float | None = None) -> None:
        if self.flush_error is not None:
            raise self.flush_error


@pytest.fixture
def producer(monkeypatch: pytest.MonkeyPatch) -> kafka_python.KafkaPythonProducer:
    monkeypatch.setattr(kafka_python, "KafkaProducer", _FakeProducer)
    return kafka_python.KafkaPythonProducer({})


def _sent(producer: kafka_python.KafkaPythonProducer, topic: str, *tokens: str) -> list[Future]:
    """Send one record per token (its key the token's bytes); their futures, in order."""
    for token in tokens:
        producer.send(topic, token.encode(), b"v", token=token)
    fake: Any = producer._producer
    futures: list[Future] = fake.futures[-len(tokens) :]
    return futures


def test_flush_reports_each_failed_send_once_with_its_token(
    producer: kafka_python.KafkaPythonProducer,
) -> None:
    ok, big, lost = _sent(producer, "app.sessions", "ok", "big", "lost")
    ok.success(None)
    big.failure(MessageSizeTooLargeError("too big"))
    lost.failure(KafkaTimeoutError("expired"))
    failures = producer.flush(1.0)
    assert [(f.token, f.too_large, f.key) for f in failures] == [
        ("big", True, b"big"),
        ("lost", False, b"lost"),
    ]
    assert failures[1].detail == repr(lost.exception)
    assert producer.flush(1.0) == []  # reported once


def test_a_flush_that_times_out_raises_and_forgets_the_sends(
    producer: kafka_python.KafkaPythonProducer,
) -> None:
    fake: Any = producer._producer
    producer.send("app.sessions", b"k", b"v", token=1)
    fake.futures[0].failure(KafkaTimeoutError("expired"))
    fake.flush_error = KafkaTimeoutError("Timeout waiting for future")
    with pytest.raises(FlushIncomplete):
        producer.flush(0.1)
    fake.flush_error = None
    assert producer.flush(1.0) == []  # replayed by the caller's rewind, not reported again


def test_a_producer_that_never_flushes_keeps_only_the_sends_in_flight(
    producer: kafka_python.KafkaPythonProducer,
) -> None:
    # `sessionizer produce` of an endless input flushes only at its end: every send's future
    # was kept until then, and the producer's memory grew with every record it sent.
    fake: Any = producer._producer
    for n in range(20_000):
        producer.send("app.stream.0000", b"k", b"v", token=n)
        if n < 19_900:  # acknowledged, or failed (one); the last 100 are still in flight
            future = fake.futures[n]
            future.failure(KafkaTimeoutError("expired")) if n == 7 else future.success(None)
    assert producer.unsettled <= kafka_python._SETTLE_EVERY + 100
    for future in fake.futures[19_900:]:
        future.success(None)
    assert [f.token for f in producer.flush(1.0)] == [7]  # settled early, reported at flush
    assert producer.unsettled == 0 and producer.flush(1.0) == []


def test_the_producer_lets_go_of_each_done_send_soon_after_it_is_done(
    producer: kafka_python.KafkaPythonProducer,
) -> None:
    # Futures kept thousands of sends after kafka-python let go of them reached the
    # collector's oldest generation: about 6 % more CPU per fragment (HOT_PATH.md, round 16).
    fake: Any = producer._producer
    for n in range(10_000):
        producer.send("app.stream.0000", b"k", b"v", token=n)
        fake.futures[n].success(None)
        assert producer.unsettled <= kafka_python._LOOK_EVERY
    assert producer.flush(1.0) == [] and producer.unsettled == 0


def test_an_oldest_send_in_flight_does_not_keep_the_done_ones_behind_it(
    producer: kafka_python.KafkaPythonProducer,
) -> None:
    fake: Any = producer._producer
    producer.send("app.stream.0001", b"k", b"v", token="stuck")  # its partition's leader is away
    for n in range(1, 20_000):
        producer.send("app.stream.0000", b"k", b"v", token=n)
        future = fake.futures[n]
        future.failure(KafkaTimeoutError("expired")) if n == 9 else future.success(None)
    assert producer.unsettled <= kafka_python._SETTLE_EVERY
    fake.futures[0].success(None)
    assert [f.token for f in producer.flush(1.0)] == [9]


def test_a_kept_send_adds_no_object_for_the_cyclic_collector_to_count(
    producer: kafka_python.KafkaPythonProducer,
) -> None:
    # A tuple kept per send was one more container per record: the collector scanned the
    # young generation about 13 % more often (benchmarks/HOT_PATH.md, round 19).
    fake: Any = producer._producer
    in_flight = Future()  # one future for every send: the fake allocates nothing
    fake.send = lambda topic, **fields: in_flight
    gc.disable()
    try:
        gc.collect()
        before = gc.get_count()[0]
        for n in range(2_000):
            producer.send("app.stream.0000", b"k", b"v", token=n)
        allocated = gc.get_count()[0] - before
    finally:
        gc.enable()
    assert producer.unsettled == 2_000
    assert allocated < 100, f"{allocated} objects the collector counts for 2,000 sends"


def test_a_refused_send_raises_the_projects_class(
    producer: kafka_python.KafkaPythonProducer,
) -> None:
    fake: Any = producer._producer
    fake.refuse = MessageSizeTooLargeError("over max_request_size")
    with pytest.raises(RecordTooLarge):
        producer.send("app.sessions", b"k", b"v")
    fake.refuse = KafkaTimeoutError("no metadata within max_block_ms")
    with pytest.raises(SendFailed) as caught:
        producer.send("app.sessions", b"k", b"v")
    assert type(caught.value) is SendFailed


def test_a_confluent_send_is_refused_mapped_or_retried_behind_a_full_queue() -> None:
    """librdkafka without a broker: a record over `message.max.bytes` is refused at once as
    `RecordTooLarge`; a full local queue (`BufferError`) is served, then the record queued;
    an exception of no client passes unchanged."""
    producer = ConfluentProducer({"bootstrap.servers": "127.0.0.1:1", "message.max.bytes": 1_000})
    try:
        with pytest.raises(RecordTooLarge):
            producer.send("app.stream.0000", b"k", b"x" * 2_000, partition=0)
        queued: list[bytes] = []

        def produce(topic: str, value: bytes, key: bytes, **options: Any) -> None:
            if key == b"odd":
                raise ValueError("not a client's")
            if not queued:
                queued.append(b"full")
                raise BufferError("Local: Queue full")
            queued.append(key)

        producer._produce = produce
        producer.send("app.stream.0000", b"first", b"v", partition=0, timestamp_ms=1)
        assert queued == [b"full", b"first"]
        with pytest.raises(ValueError, match="not a client's"):
            producer.send("app.stream.0000", b"odd", b"v", partition=0)
    finally:
        producer.close(0)


def test_a_confluent_topic_sender_produces_in_one_call_and_falls_back_to_send() -> None:
    """The stream producer's fast path: `produce` with partition 0 as the only call; a
    refusal goes through `send`, so it is served (a full queue) or mapped the same way."""
    producer = ConfluentProducer({"bootstrap.servers": "127.0.0.1:1", "message.max.bytes": 1_000})
    try:
        calls: list[tuple[str, bytes, str]] = []

        def produce(topic: str, value: bytes, key: bytes, *args: Any, **options: Any) -> None:
            how = "produce alone" if args == (0,) else "by send"  # send passes keywords
            if key == b"full" and not any(k == b"full" for _, k, _ in calls):
                calls.append((topic, key, how))
                raise BufferError("Local: Queue full")
            calls.append((topic, key, how))

        producer._produce = produce
        send_to = producer.topic_sender(["app.stream.0000", "app.stream.0001"])
        send_to(1, b"fast", b"v", 5)
        send_to(0, b"full", b"v", 6)
        assert calls == [
            ("app.stream.0001", b"fast", "produce alone"),
            ("app.stream.0000", b"full", "produce alone"),
            ("app.stream.0000", b"full", "by send"),  # served by `send`, then queued
        ]
        del producer._produce
        too_large = ConfluentProducer(
            {"bootstrap.servers": "127.0.0.1:1", "message.max.bytes": 1_000}
        )
        try:
            with pytest.raises(RecordTooLarge):
                too_large.topic_sender(["app.stream.0000"])(0, b"k", b"x" * 2_000, 1)
        finally:
            too_large.close(0)
    finally:
        producer.close(0)


def test_a_kafka_python_topic_senders_sends_are_kept_and_reported_as_sends_are(
    producer: kafka_python.KafkaPythonProducer,
) -> None:
    fake: Any = producer._producer
    send_to = producer.topic_sender(["app.stream.0000", "app.stream.0001"])
    _sent(producer, "app.sessions", "by send")
    send_to(1, b"fast", b"v", 7)
    assert producer.unsettled == 2
    by_send, fast = fake.futures
    by_send.success(None)
    fast.failure(KafkaTimeoutError("expired"))
    assert [(f.topic, f.key, f.token) for f in producer.take_failures()] == [
        ("app.stream.0001", b"fast", None)
    ]
    assert producer.flush(1.0) == []  # reported once


def test_a_kafka_python_topic_sender_sends_to_partition_zero_and_maps_refusals(
    producer: kafka_python.KafkaPythonProducer,
) -> None:
    fake: Any = producer._producer
    send_to = producer.topic_sender(["app.stream.0000", "app.stream.0001"])
    send_to(1, b"k", b"v", 7)
    assert fake.sent[-1] == ("app.stream.0001", {"value": b"v", "key": b"k", "headers": None,
                                                 "partition": 0, "timestamp_ms": 7})  # fmt: skip
    fake.refuse = MessageSizeTooLargeError("over max_request_size")
    with pytest.raises(RecordTooLarge):
        send_to(0, b"k", b"v", 8)
