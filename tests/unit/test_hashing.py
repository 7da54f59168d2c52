"""The routing contract: jump-hash vectors, pinned BLAKE2b-64 keys, properties, stream names."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from framework.kernel.errors import ConfigError
from framework.kernel.names import InvalidAppName
from router.errors import StreamCountMismatch
from router.hashing import hash64, jump_consistent_hash, stream_for_key
from router.naming import deadletter_topic, sessions_topic, stream_index, stream_name

ROUTING_DOC = Path(__file__).resolve().parents[2] / "docs" / "routing.md"

# Guava's HashingTest.testConsistentHash_linearCongruentialGeneratorCompatibility
# ("golden values to see that implementations across languages are equivalent").
GUAVA_GOLDEN_100 = [0, 55, 62, 8, 45, 59, 86, 97, 82, 59, 73, 37, 17, 56, 86, 21, 90, 37, 38, 83]
GUAVA_VECTORS = [
    (10863919174838991, 11, 6),
    (2016238256797177309, 11, 3),
    (1673758223894951030, 11, 5),
    (2, 100001, 80343),
    (2201, 100001, 22152),
    (2202, 100001, 15018),
]
# ClickHouse tests/queries/0_stateless/00580_consistent_hashing_functions (.sql/.reference);
# the last one exercises a key above 2**63.
CLICKHOUSE_VECTORS = [
    (1, 1, 0),
    (42, 57, 43),
    (256, 1024, 520),
    (3735883980, 1, 0),
    (3735883980, 666, 361),
    (16045690984833335023, 255, 237),
]
# dgryski/go-jump jump_test.go, "generated from the reference C++ code": buckets for n = 1, 2, ...
GO_JUMP_VECTORS = {
    0: [0] * 20,
    1: [0, 0, 0, 0, 0, 0, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 17, 17],
    0xDEADBEEF: [0, 1, 2, 3, 3, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 16, 16, 16],
    0x0DDC0FFEEBADF00D: [0, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 15, 15, 15, 15],
}

# (key, BLAKE2b-64 digest as `b2sum -l 64` prints it, hash64, stream for n = 16, 64, 288).
# Digests were cross-checked with coreutils b2sum, an implementation independent of hashlib.
# "caf\u00e9" and "cafe\u0301" show that keys are hashed without Unicode normalization.
KEY_VECTORS = [
    ("", "e4a6a0577479b2b4", 13020603013274838756, 6, 46, 46),
    ("a", "40f89e395b66422f", 3405396810240292928, 10, 51, 64),
    ("abc", "d8bb14d833d59559", 6455300059550759896, 4, 4, 210),
    ("session-42", "28bd467cbc4b1aac", 12401307796829027624, 15, 15, 64),
    (
        "83.149.9.216|Mozilla/5.0 (Macintosh; Intel Mac OS X 10_9_1) AppleWebKit/537.36 "
        "(KHTML, like Gecko) Chrome/32.0.1700.77 Safari/537.36",
        "95de3cbf665124f9",
        17952563516342591125,
        8,
        44,
        141,
    ),
    ("ip-10-77-20-248:1361", "948e4f597ca5d7bb", 13535469158578228884, 2, 2, 123),
    ("M\u00fcnchen", "0787e12ac0a8132f", 3392240487646725895, 15, 47, 47),
    ("\u65e5\u672c\u8a9e\u306e\u30ad\u30fc", "a86c60e21d57c470", 8125715413546855592, 15, 20, 166),
    ("\U0001f642 emoji", "99b344d756f5b040", 4661495367656059801, 3, 3, 86),
    ("caf\u00e9", "5777a2bd3192d7e3", 16417751708935026519, 15, 15, 72),
    ("cafe\u0301", "e2aa25c9af40ac58", 6389553095070034658, 13, 21, 21),
    ("\u03a9\u03bc\u03ad\u03b3\u03b1|\u03b6", "9c01ea69e98972a1", 11633512423048741276, 6, 6, 273),
]


def test_guava_golden_values() -> None:
    assert [jump_consistent_hash(key, 100) for key in range(20)] == GUAVA_GOLDEN_100
    for key, buckets, expected in GUAVA_VECTORS:
        assert jump_consistent_hash(key, buckets) == expected


@pytest.mark.parametrize(("key", "buckets", "expected"), CLICKHOUSE_VECTORS)
def test_clickhouse_vectors(key: int, buckets: int, expected: int) -> None:
    assert jump_consistent_hash(key, buckets) == expected


@pytest.mark.parametrize("key", sorted(GO_JUMP_VECTORS))
def test_reference_cpp_vectors(key: int) -> None:
    expected = GO_JUMP_VECTORS[key]
    assert [jump_consistent_hash(key, n) for n in range(1, len(expected) + 1)] == expected


@pytest.mark.parametrize(("key", "digest", "h64", "n16", "n64", "n288"), KEY_VECTORS)
def test_key_vectors(key: str, digest: str, h64: int, n16: int, n64: int, n288: int) -> None:
    # The digest's bytes, read little-endian, are the 64-bit value the jump hash gets.
    assert int.from_bytes(bytes.fromhex(digest), "little") == h64
    assert hash64(key) == h64
    assert [stream_for_key(key, n) for n in (16, 64, 288)] == [n16, n64, n288]


def test_docs_table_matches_the_contract() -> None:
    """docs/routing.md's vector table is what a producer in another language checks against."""
    rows = []
    for line in ROUTING_DOC.read_text(encoding="utf-8").splitlines():
        if not line.startswith('| `"'):
            continue
        cells = [
            cell.strip().strip("`").replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line)
        ]
        key, digest, h64, n16, n64, n288 = cells[1:7]
        rows.append((json.loads(key), digest, int(h64), int(n16), int(n64), int(n288)))
    assert rows == KEY_VECTORS


@pytest.mark.parametrize("buckets", [0, -1])
def test_rejects_fewer_than_one_bucket(buckets: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        jump_consistent_hash(1, buckets)
    with pytest.raises(ValueError, match="at least 1"):
        stream_for_key("k", buckets)


@pytest.mark.parametrize("key", [-1, 1 << 64])
def test_rejects_keys_outside_64_bits(key: int) -> None:
    with pytest.raises(ValueError, match="unsigned 64-bit"):
        jump_consistent_hash(key, 10)


@given(key=st.integers(0, (1 << 64) - 1), buckets=st.integers(1, 5000))
def test_growing_by_one_moves_keys_only_to_the_new_bucket(key: int, buckets: int) -> None:
    before = jump_consistent_hash(key, buckets)
    after = jump_consistent_hash(key, buckets + 1)
    assert 0 <= before < buckets
    assert after in (before, buckets)


@given(key=st.text(), streams=st.integers(1, 1000))
def test_any_text_key_lands_in_range(key: str, streams: int) -> None:
    assert 0 <= hash64(key) < 1 << 64
    assert 0 <= stream_for_key(key, streams) < streams


@pytest.mark.parametrize("streams", [16, 64, 288])
def test_spread_is_roughly_uniform(streams: int) -> None:
    keys = [f"10.0.{i // 256}.{i % 256}|agent-{i % 7}" for i in range(50_000)]
    counts = Counter(stream_for_key(key, streams) for key in keys)
    expected = len(keys) / streams
    chi2 = sum((counts[s] - expected) ** 2 / expected for s in range(streams))
    # Deterministic input; the bound is about six standard deviations above the mean.
    assert chi2 < (streams - 1) + 6 * (2 * (streams - 1)) ** 0.5
    moved = sum(stream_for_key(key, streams + 1) == streams for key in keys)
    assert abs(moved - len(keys) / (streams + 1)) < 0.15 * len(keys) / (streams + 1)


# -- stream naming, the other half of the routing contract ------------------------------


def test_stream_and_topic_names() -> None:
    assert stream_name("shop", 7) == "shop.stream.0007"
    assert stream_name("shop", 12345) == "shop.stream.12345"
    assert sessions_topic("shop") == "shop.sessions"
    assert deadletter_topic("shop") == "shop.deadletter"


@given(app=st.from_regex(r"[A-Za-z0-9._-]{1,30}", fullmatch=True), index=st.integers(0, 10**6))
def test_stream_index_inverts_stream_name(app: str, index: int) -> None:
    assume(app not in (".", ".."))
    assert stream_index(stream_name(app, index)) == index
    assert stream_index(stream_name(app, index), app=app) == index


@pytest.mark.parametrize(
    "name",
    ["shop.stream.7", "shop.stream.00007", "shop.sessions", "shop.stream.12a4", "a/b.stream.0001"],
)
def test_stream_index_rejects_other_names(name: str) -> None:
    with pytest.raises(ValueError, match="not a stream topic name"):
        stream_index(name)


def test_stream_index_checks_the_app() -> None:
    with pytest.raises(ValueError, match="not a stream of app 'shop'"):
        stream_index("blog.stream.0001", app="shop")


@pytest.mark.parametrize("app", ["", ".", "..", "a/b", "with space", "caf\u00e9", "x" * 201])
def test_invalid_app_names(app: str) -> None:
    with pytest.raises(InvalidAppName, match="invalid app name") as info:
        sessions_topic(app)
    assert isinstance(info.value, ConfigError)  # the operator fixes --app / SESSIONIZER_APP


def test_negative_stream_index() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        stream_name("shop", -1)


def test_stream_count_mismatch_says_both_counts_and_what_to_do() -> None:
    error = StreamCountMismatch("shop", expected=16, configured=8)
    assert isinstance(error, ConfigError)
    assert "16 streams recorded in ZooKeeper" in str(error)
    assert "configured for 8" in str(error)
    assert "streams create --count 8" in str(error)
