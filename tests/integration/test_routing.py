"""The thesis's routing verification (3.5.1) on real Kafka with the real logs."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from framework.kernel.watermark import Watermark
from framework.testing.cli import DATA, cli, cli_json
from router.errors import MalformedLine, ProduceFailed
from router.formats import parse_line
from router.formats_sshd import log_year
from router.fragment import ParsedFragment
from router.hashing import stream_for_key
from router.naming import stream_index, stream_name
from router.producer import ProducerConfig, StreamProducer
from router.readback import read_topics
from router.wire import decode_record, encode_fragment

pytestmark = pytest.mark.integration
STREAMS = 16
CLIENTS = ("kafka-python", "confluent")


def _expected(fmt: str, path) -> Counter:
    """Each fragment the file holds, parsed independently of the producer, as wire bytes."""
    fragments: Counter = Counter()
    year = log_year(path)  # `produce` dates syslog lines from the file's modification time
    with path.open(encoding="utf-8", errors="replace", newline="") as lines:
        for line in lines:
            try:
                fragment = parse_line(fmt, line, year=year)
            except MalformedLine:
                continue
            fragments[(*encode_fragment(fragment), fragment.timestamp_ms)] += 1
    return fragments


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize(
    ("fmt", "name", "counts"),
    [
        ("apache", "apache_logs", {"read": 10000, "parsed": 9999, "rejected": 1, "sent": 9999}),
        ("sshd", "auth.log", {"read": 7121, "parsed": 4095, "rejected": 3026, "sent": 4095}),
    ],
)
def test_every_fragment_lands_once_in_the_stream_the_contract_names(
    zk_hosts: str, kafka_bootstrap: str, app: str, fmt: str, name: str, counts: dict, client: str
) -> None:
    """Both Kafka clients write the same records: every one decodes, fragments exactly once."""
    path = DATA / name
    conn = {"zk": zk_hosts, "bootstrap": kafka_bootstrap, "app": app}
    cli_json("streams", "create", "--count", str(STREAMS), **conn)
    options = ["--format", fmt, "--end-of-input", "--json", "--kafka-client", client]
    stats = cli_json("produce", str(path), *options, **conn)
    assert {k: stats[k] for k in counts} == counts
    assert sum(stats["reasons"].values()) == counts["rejected"]

    topics = [stream_name(app, i) for i in range(STREAMS)]
    read: Counter = Counter()
    streams_of_key: dict[str, set[int]] = {}
    for topic, records in read_topics(kafka_bootstrap, topics).items():
        decoded = [
            decode_record(r.key, r.value, r.headers, r.timestamp, offset=r.offset) for r in records
        ]
        assert decoded[-1] == Watermark(decoded[-1].timestamp_ms, end=True), topic
        for record, item in zip(records, decoded, strict=True):
            if isinstance(item, Watermark):
                continue
            index = stream_index(topic)
            assert stream_for_key(item.key, STREAMS) == index
            streams_of_key.setdefault(item.key, set()).add(index)
            read[(record.key, record.value, record.timestamp)] += 1

    expected = _expected(fmt, path)
    assert read == expected  # every fragment exactly once, nothing extra
    assert all(len(s) == 1 for s in streams_of_key.values())
    bytes_in = sum((len(k) + len(v)) * n for (k, v, _), n in expected.items())
    assert sum((len(k) + len(v)) * n for (k, v, _), n in read.items()) == bytes_in


@pytest.mark.parametrize("stdin_errors", ["default", "strict"])
def test_standard_input_is_read_as_the_same_bytes_in_a_file_are(
    zk_hosts: str, kafka_bootstrap: str, app: str, tmp_path: Path, stdin_errors: str
) -> None:
    """`produce -` parses, rejects and sends exactly what `produce FILE` does with the same
    bytes: bytes that are not UTF-8 become U+FFFD, whatever the locale says of stdin
    ("strict": a UTF-8 locale's; "default": this machine's C.UTF-8, surrogateescape)."""
    conn = {"zk": zk_hosts, "bootstrap": kafka_bootstrap, "app": app}
    cli_json("streams", "create", "--count", "4", **conn)
    lines = (DATA / "apache_logs").read_bytes().splitlines(keepends=True)[:300]
    lines[10] = lines[10].replace(b"Mozilla", b"Moz\xff\xfeilla", 1)  # a raw byte in a field
    lines[20] = lines[20].rstrip(b"\n") + b"\r\n"
    data = b"".join(lines)
    path = tmp_path / "access.log"
    path.write_bytes(data)
    from_file = cli_json("produce", str(path), "--format", "apache", "--json", **conn)
    env = dict(os.environ)
    if stdin_errors == "strict":
        env["PYTHONIOENCODING"] = "utf-8:strict"
    command = [
        str(Path(sys.executable).with_name("sessionizer")), "produce", "-", "--format", "apache",
        "--json", "--zk", zk_hosts, "--bootstrap", kafka_bootstrap, "--app", app,
    ]  # fmt: skip
    done = subprocess.run(command, input=data, capture_output=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    from_stdin = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert from_stdin == from_file == {"read": 300, "parsed": 300, "rejected": 0, "sent": 300,
                                       "reasons": {}}  # fmt: skip
    records = read_topics(kafka_bootstrap, [stream_name(app, i) for i in range(4)])
    sent = Counter((r.key, r.value, r.timestamp) for rs in records.values() for r in rs if r.key)
    assert sum(sent.values()) == 600 and set(sent.values()) == {2}  # each line twice, alike
    assert any("\ufffd".encode() in value for _, value, _ in sent)


def test_stream_count_is_a_contract(zk_hosts: str, kafka_bootstrap: str, app: str) -> None:
    conn = {"zk": zk_hosts, "bootstrap": kafka_bootstrap, "app": app}
    cli_json("streams", "create", "--count", "4", **conn)
    again = cli_json("streams", "create", "--count", "4", **conn)
    assert again["created"] == 0

    code, _, err = cli("streams", "create", "--count", "5", **conn)
    assert code == 2 and "4 streams recorded" in err and "configured for 5" in err

    code, _, err = cli("generate", "--sessions", "3", "--streams", "8", **conn)
    assert code == 2 and "configured for 8" in err


def test_produce_without_streams_says_what_to_do(
    zk_hosts: str, kafka_bootstrap: str, app: str
) -> None:
    code, _, err = cli(
        "generate", "--sessions", "1", zk=zk_hosts, bootstrap=kafka_bootstrap, app=app
    )
    assert code == 2 and "streams create" in err


def test_malformed_jsonl_lines_are_counted_by_reason_and_never_crash(
    zk_hosts: str, kafka_bootstrap: str, app: str, tmp_path
) -> None:
    conn = {"zk": zk_hosts, "bootstrap": kafka_bootstrap, "app": app}
    cli_json("streams", "create", "--count", "2", **conn)
    lines = [
        '{"key": "a", "ts": 1000, "page": "/"}',
        '{"key": "a", "ts": 2000, "huge": 1180591620717411303424}',  # 2**70: no msgpack int
        "{not json",
        '{"ts": 5}',
        '{"key": "b", "ts": "yesterday"}',
        "",
        '{"key": "b", "ts": "2015-05-17T10:05:00Z"}',
    ]
    path = tmp_path / "input.jsonl"
    path.write_text("\n".join(lines) + "\n")
    stats = cli_json("produce", str(path), "--format", "jsonl", "--json", **conn)
    assert stats == {
        "read": 7, "parsed": 2, "rejected": 5, "sent": 2,
        "reasons": {"bad-json": 1, "bad-timestamp": 1, "empty": 1, "missing-key": 1,
                    "unencodable": 1},
    }  # fmt: skip


@pytest.mark.parametrize("client", CLIENTS)
def test_watermark_interval_sets_how_far_a_stream_may_lag_before_a_watermark(
    zk_hosts: str, kafka_bootstrap: str, app: str, client: str
) -> None:
    watermarks = {}
    for interval in ("60", "3600"):
        conn = {"zk": zk_hosts, "bootstrap": kafka_bootstrap, "app": f"{app}-w{interval}"}
        cli_json("streams", "create", "--count", "8", **conn)
        options = ["--sessions", "300", "--watermark-interval", interval, "--json"]
        options += ["--kafka-client", client]
        cli_json("generate", *options, **conn)
        records = read_topics(kafka_bootstrap, [stream_name(conn["app"], i) for i in range(8)])
        watermarks[interval] = sum(
            isinstance(decode_record(r.key, r.value, r.headers, r.timestamp), Watermark)
            for batch in records.values()
            for r in batch
        )
    assert 0 < watermarks["3600"] < watermarks["60"]


def _key_on(stream: int, streams: int) -> str:
    return next(k for i in range(10_000) if stream_for_key(k := f"key-{i}", streams) == stream)


@pytest.mark.parametrize("client", CLIENTS)
def test_a_record_the_broker_refuses_fails_the_flush_and_is_not_counted_sent(
    zk_hosts: str, kafka_bootstrap: str, app: str, client: str
) -> None:
    conn = {"zk": zk_hosts, "bootstrap": kafka_bootstrap, "app": app}
    cli_json("streams", "create", "--count", "2", **conn)
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:  # stream 1 takes no record batch over 2,000 bytes
        limit = {"max.message.bytes": "2000"}
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, stream_name(app, 1), limit)])
    finally:
        admin.close()
    config = ProducerConfig(kafka_bootstrap, app, 2, kafka_client=client)  # type: ignore[arg-type]
    producer = StreamProducer(config)
    try:
        producer.send(ParsedFragment(_key_on(0, 2), 1_000, {"page": "/"}))
        blob = random.Random(1).randbytes(4_000).hex()  # 8,000 bytes that lz4 cannot shrink
        producer.send(ParsedFragment(_key_on(1, 2), 2_000, {"blob": blob}))
        with pytest.raises(ProduceFailed, match="1 sends failed"):
            producer.flush(timeout=60)
        assert producer.stats.sent == 1
    finally:
        producer.close()
