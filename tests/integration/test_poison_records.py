"""Issue 12: poison records and unsendable sessions never kill a node and never lose a session.

Real ZooKeeper and Kafka, nodes as processes, the real Apache log.  Every poison
record must come out as exactly one dead letter (by stream and offset: a replay
after a rebalance may send one again), every session that can never be sent as a
dead letter that references it, and everything else exactly as the batch
definition says.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import msgpack
import pytest
from kafka import KafkaProducer
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient
from kafka.errors import InvalidTimestampError
from kafka.producer.future import RecordMetadata
from kazoo.client import KazooClient

from framework.kernel.config import ConnectionConfig
from framework.kernel.watermark import Watermark
from framework.kernel.zookeeper import zookeeper_client
from framework.provision import provision_streams
from framework.sessions import read_sessions
from framework.testing.cli import DATA
from framework.testing.members import wait_for
from framework.testing.nodes import NodeGroup, settled_alive, streams_of
from framework.testing.processors import (
    HOOK_POISON_PATH,
    TimestampPoisonWebSessions,
    UnsendableWebSessions,
    unsendable_kind,
)
from framework.testing.traffic import produce
from framework.verify import expected_sessions, verify_sessions
from router.formats import parse_file
from router.fragment import ParsedFragment
from router.naming import deadletter_topic, stream_name
from router.readback import read_topics
from router.wire import KIND_HEADER, WATERMARK_KIND, decode_record, encode_fragment
from sessionizer.processor import StreamProcessor, Timing
from sessionizer.records import Fragment
from sessionizer.reference import BatchSession, batch_sessions

pytestmark = pytest.mark.integration
STREAMS = 16
NODES = ("n1", "n2")
YEAR_2100_MS = 4_102_444_800_000  # 2100-01-01T00:00:00Z
REFERENCE_FIELDS = {"stream", "session_id", "first_offset", "last_offset", "reason", "error"}


@dataclass(frozen=True)
class Poison:
    """One bad record written straight to a stream, and where it landed."""

    name: str
    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]]
    timestamp_ms: int
    decode_failure: bool
    """True when the record itself is bad (not a hook of the processor)."""
    stream: str = ""
    offset: int = -1


def _apache_fragments() -> list[ParsedFragment]:
    path = DATA / "apache_logs"
    return parse_file(path, "apache")


def _corruptions(clean: list[ParsedFragment], timestamp_ms: int) -> list[Poison]:
    """Seeded one-byte corruptions of valid fragment records that no decoder can accept.

    A corruption that still unpacks to a map is a different but valid fragment, so
    it is skipped: each kept one fails to unpack (two of them with the `TypeError`
    of an unhashable map key, the class that escaped the dead-letter path).
    """
    wanted = Counter({"TypeError": 2, "ExtraData": 1, "UnicodeDecodeError": 1, "ValueError": 1})
    rng = random.Random(12)
    found: list[Poison] = []
    for fragment in clean:
        key, value = encode_fragment(fragment)
        position, byte = rng.randrange(len(value)), rng.randrange(256)
        if value[position] == byte:
            continue
        corrupt = value[:position] + bytes([byte]) + value[position + 1 :]
        try:
            unpacked = msgpack.unpackb(corrupt, raw=False, strict_map_key=False)
        except Exception as exc:  # which exception is the point: any of them
            kind = type(exc).__name__
        else:
            kind = "" if isinstance(unpacked, dict) else "not-a-map"
        if wanted[kind] > 0:
            wanted[kind] -= 1
            found.append(Poison(f"corrupt-{kind}-{position}", key, corrupt, [], timestamp_ms, True))
        if not +wanted:
            return found
    raise AssertionError(f"the seeded search found too few corruptions, missing {+wanted}")


def _poison_records(clean: list[ParsedFragment], now_ms: int) -> list[Poison]:
    """Every kind of poison record of issue 12 (bugs 3 and 4)."""
    watermark = [(KIND_HEADER, WATERMARK_KIND)]
    template = dict(clean[0].fields)
    valid_key, valid_value = encode_fragment(clean[0])
    _, hook_value = encode_fragment(
        ParsedFragment("198.51.100.23|hook", now_ms, {**template, "path": HOOK_POISON_PATH})
    )
    _, future_value = encode_fragment(
        ParsedFragment("198.51.100.21|future", YEAR_2100_MS, template)
    )
    poison = [
        Poison("watermark-inf", None, msgpack.packb({"watermark": float("inf")}), watermark,
               now_ms, True),
        Poison("watermark-1e300", None, msgpack.packb({"watermark": 1e300}), watermark,
               now_ms, True),
        # A valid watermark far behind stream time: only `end` ("no", not a boolean) is bad.
        Poison("watermark-end-no", None,
               msgpack.packb({"end": "no", "watermark": clean[0].timestamp_ms}), watermark,
               now_ms, True),
        Poison("array-key", b"198.51.100.24|array-key",
               b"\x81" + msgpack.packb([1, 2]) + msgpack.packb(1), [], now_ms, True),
        Poison("map-key", b"198.51.100.25|map-key",
               b"\x81" + msgpack.packb({"a": 1}) + msgpack.packb(1), [], now_ms, True),
        Poison("year-2100", b"198.51.100.21|future", future_value, [], YEAR_2100_MS, True),
        Poison("key-not-utf8", b"\xff\xfe\x80", valid_value, [], now_ms, True),
        Poison("not-msgpack", valid_key, b"\xc1 not msgpack", [], now_ms, True),
        Poison("timestamp-hook-2**64", b"198.51.100.23|hook", hook_value, [], now_ms, False),
    ]  # fmt: skip
    return poison + _corruptions(clean, now_ms)


def _allow_far_future_timestamps(bootstrap: str, topic: str) -> None:
    """Let `topic` take a record dated 2100 (brokers refuse timestamps over a year ahead)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        setting = {"message.timestamp.after.max.ms": str(2**63 - 1)}
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs=setting)])
    finally:
        admin.close()


def _write_poison(bootstrap: str, app: str, poison: list[Poison]) -> list[Poison]:
    """Write each record to partition 0 of a stream (spread over several); return where."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    placed = []

    def send(stream: str, record: Poison) -> RecordMetadata | None:
        future = producer.send(
            stream, key=record.key, value=record.value, headers=record.headers,
            partition=0, timestamp_ms=record.timestamp_ms,
        )  # fmt: skip
        try:
            return future.get(timeout=30)
        except InvalidTimestampError:
            return None  # the topic's new setting has not reached the broker yet

    try:
        for i, record in enumerate(poison):
            stream = stream_name(app, (5 * i + 1) % STREAMS)
            if record.timestamp_ms > time.time() * 1000 + 3_600_000:
                _allow_far_future_timestamps(bootstrap, stream)
            sent = wait_for(lambda s=stream, r=record: send(s, r), 30, f"{record.name} written")
            placed.append(replace(record, stream=stream, offset=sent.offset))
    finally:
        producer.close()
    return placed


def _dead_letters(bootstrap: str, app: str) -> list[Any]:
    topic = deadletter_topic(app)
    return read_topics(bootstrap, [topic])[topic]


def _headers(record: object) -> dict[str, str]:
    return {k: v.decode("utf-8", "replace") for k, v in getattr(record, "headers", None) or ()}


def _wait_caught_up(zk: KazooClient, connection: ConnectionConfig, group: NodeGroup) -> None:
    """Wait until every node of NODES runs and the streams are read to their end."""
    streams = streams_of(connection.app, STREAMS)
    wait_for(lambda: settled_alive(zk, connection, group, NODES, streams), 180, "catch-up")


def test_poison_records_become_dead_letters_and_no_node_dies(
    zk_hosts: str, kafka_bootstrap: str, app: str, tmp_path: Path
) -> None:
    """Every poison kind of bugs 3 and 4, between the two halves of the log, on 2 nodes.

    Each poison record is one dead letter with its original bytes and a reason (a
    record-level reason, not `hook:*`, for the records that are bad in themselves);
    the year-2100 fragment is rejected without making the rest of its stream late.
    """
    connection = ConnectionConfig(zk_hosts, kafka_bootstrap, app)
    provision_streams(connection, STREAMS)
    clean = _apache_fragments()
    half = len(clean) // 2
    now_ms = max(f.timestamp_ms for f in clean[:half])
    processor = "framework.testing.processors:TimestampPoisonWebSessions"
    with NodeGroup(connection, tmp_path, processor) as group, zookeeper_client(zk_hosts) as zk:
        for node in NODES:
            group.start(node)
        produce(connection, STREAMS, clean[:half], end=False)
        poison = _write_poison(kafka_bootstrap, app, _poison_records(clean, now_ms))
        produce(connection, STREAMS, clean[half:], end=True)
        _wait_caught_up(zk, connection, group)
        assert group.running() == list(NODES)

    letters: dict[tuple[str, int], list[Any]] = {}
    for record in _dead_letters(kafka_bootstrap, app):
        headers = _headers(record)
        where = (headers.get("stream", "?"), int(headers.get("offset", -1)))
        letters.setdefault(where, []).append(record)  # a replay may send one twice
    expected = {(p.stream, p.offset): p for p in poison}
    missing = sorted(p.name for where, p in expected.items() if where not in letters)
    extra = sorted(where for where in letters if where not in expected)
    assert not missing and not extra, (
        f"poison records without a dead letter: {missing}; dead letters of records that "
        f"were not poison (late?): {len(extra)}, first {extra[:5]}"
    )
    for where, record in expected.items():
        reasons = {_headers(letter)["reason"] for letter in letters[where]}
        assert len(reasons) == 1 and all(reasons), (record.name, reasons)
        if record.decode_failure:
            assert not reasons.pop().startswith("hook:"), (record.name, _headers(letters[where][0]))
        letter = letters[where][0]
        assert (letter.key, letter.value) == (record.key, record.value), record.name

    written = read_sessions(kafka_bootstrap, app, deduplicate=False)
    result = verify_sessions(written, expected_sessions(clean, TimestampPoisonWebSessions()),
                             len(clean))  # fmt: skip
    print(f"\npoison records {len(poison)}, dead letters {sum(map(len, letters.values()))}; "
          f"{result.line()}")  # fmt: skip
    assert result.exact, result


def _reference_sessions(
    bootstrap: str, app: str, processor: StreamProcessor
) -> list[tuple[str, BatchSession]]:
    """The batch definition per stream, with the offsets the fragments really got."""
    streams = streams_of(app, STREAMS)
    timing = Timing.of(processor)
    sessions = []
    for stream, records in read_topics(bootstrap, streams).items():
        fragments = []
        for r in records:
            item = decode_record(r.key, r.value, r.headers, r.timestamp, offset=r.offset)
            if not isinstance(item, Watermark):
                ts = processor.timestamp(item.fields, item.timestamp_ms)
                fragments.append(Fragment(r.offset, item.key, ts, item.fields))
        found = batch_sessions(fragments, timing.timeout_ms, processor.is_end,
                               max_duration_ms=timing.max_duration_ms)  # fmt: skip
        sessions += [(stream, s) for s in found]
    return sessions


def test_unsendable_sessions_become_dead_letters_that_reference_them(
    zk_hosts: str, kafka_bootstrap: str, app: str, tmp_path: Path
) -> None:
    """`close()` gives a 2 MB result for some keys and a mixed-key dict for others.

    Each such session is one dead-letter reference (stream, session id, first and
    last offset as the batch definition gives them, reason); every other session
    is exact, and no node dies.
    """
    connection = ConnectionConfig(zk_hosts, kafka_bootstrap, app)
    provision_streams(connection, STREAMS)
    fragments = _apache_fragments()
    produce(connection, STREAMS, fragments, end=True)
    processor = UnsendableWebSessions()
    reference = _reference_sessions(kafka_bootstrap, app, processor)
    unsendable = {
        s.session_id(stream): (stream, s.first_offset, s.last_offset, unsendable_kind(s.key))
        for stream, s in reference
        if unsendable_kind(s.key)
    }
    kinds = Counter(kind for *_, kind in unsendable.values())
    assert kinds["too-large"] > 0 and kinds["unencodable"] > 0, kinds

    name = "framework.testing.processors:UnsendableWebSessions"
    with NodeGroup(connection, tmp_path, name) as group, zookeeper_client(zk_hosts) as zk:
        for node in NODES:
            group.start(node)
        _wait_caught_up(zk, connection, group)
        assert group.running() == list(NODES)

    referenced: dict[str, tuple[str, int, int, str | None]] = {}
    for record in _dead_letters(kafka_bootstrap, app):
        try:
            ref = json.loads(record.value)
        except (TypeError, ValueError):
            ref = {}
        assert isinstance(ref, dict), (_headers(record), record.value[:200])
        assert set(ref) >= REFERENCE_FIELDS and ref["error"], (_headers(record), ref)
        assert _headers(record)["stream"] == ref["stream"], (_headers(record), ref)
        kind = {"session-too-large": "too-large", "session-unencodable": "unencodable"}.get(
            ref["reason"], ref["reason"]
        )
        seen = (ref["stream"], ref["first_offset"], ref["last_offset"], kind)
        assert referenced.setdefault(ref["session_id"], seen) == seen, ref  # replays agree
    assert referenced == unsendable

    written = read_sessions(kafka_bootstrap, app, deduplicate=False)
    assert not [s["session_id"] for s in written if s["session_id"] in unsendable]
    sendable = Counter(
        (s.key, s.first_ts, s.last_ts, s.fragments)
        for _, s in reference
        if not unsendable_kind(s.key)
    )
    result = verify_sessions(written, sendable, len(fragments))
    print(f"\nunsendable sessions {dict(kinds)}, referenced {len(referenced)}; {result.line()}")
    assert result.exact, result
