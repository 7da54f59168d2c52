"""Summarising py-spy's raw stacks of a node (benchmarks.profile_node)."""

from __future__ import annotations

import pytest

from benchmarks.profile_node import IDLE, NATIVE, STARTUP, classify, parse_raw, summarise

RAW = """\
thread (101): MainThread;<module> (sessionizer:8);main (framework/cli.py:40);\
run (framework/node/runner.py:60);poll (framework/node/kafka_source.py:80);\
poll (kafka/consumer/group.py:700);_poll_once (kafka/consumer/fetcher.py:300) 50
thread (101): MainThread;<module> (sessionizer:8);run (framework/node/runner.py:60);\
poll (framework/node/kafka_source.py:80);decode_record (router/wire.py:90);\
__init__ (<string>:3) 20
thread (101): MainThread;<module> (sessionizer:8);run (framework/node/runner.py:60);\
process_fragment (sessionizer/engine.py:150);update (sessionizer/examples/weblog.py:40) 15
thread (101): MainThread;<module> (sessionizer:8);run (framework/node/runner.py:60);\
emit (sessionizer/kafka_sink.py:70);send (kafka/producer/kafka.py:800) 10
thread (101): MainThread;<module> (sessionizer:8);\
_find_and_load (<frozen importlib._bootstrap>:1176) 4
thread (101): MainThread 1
thread (202): Thread-3 (zk_loop);run (threading.py:982);\
_connect_attempt (kazoo/protocol/connection.py:600) 30
thread (303): kafka-python-producer-1-network-thread;run (threading.py:982);\
run_once (kafka/producer/sender.py:160) 25
"""


def test_parse_raw_splits_thread_frames_and_count() -> None:
    samples = parse_raw(RAW.splitlines())
    assert [s.count for s in samples] == [50, 20, 15, 10, 4, 1, 30, 25]
    assert samples[0].thread == "MainThread"
    assert samples[6].thread == "Thread-3 (zk_loop)"
    assert samples[0].frames[-1] == "_poll_once (kafka/consumer/fetcher.py:300)"
    assert samples[5].frames == ()


def test_parse_raw_rejects_a_line_without_a_count() -> None:
    with pytest.raises(ValueError, match="not a py-spy raw line"):
        parse_raw(["thread (1): MainThread;f (a.py:1)"])


@pytest.mark.parametrize(
    ("frames", "category"),
    [
        (["run (framework/node/runner.py:1)", "poll (kafka/consumer/fetcher.py:2)"],
         "Kafka fetch + decode"),
        (["poll (framework/node/confluent_source.py:1)"], "Kafka fetch + decode"),
        (["poll (framework/node/kafka_source.py:1)", "decode_record (router/wire.py:2)",
          "__init__ (<string>:3)"], "record decode"),
        (["emit (sessionizer/kafka_sink.py:1)", "send (kafka/producer/kafka.py:2)"], "sink"),
        (["emit (sessionizer/confluent_sink.py:1)", "dumps (json/__init__.py:2)"], "sink"),
        (["run (framework/node/node.py:1)", "_commit_states (framework/node/node.py:2)",
          "encode (msgpack/__init__.py:3)"], "record decode"),
        (["run (framework/node/node.py:1)", "_commit_states (framework/node/node.py:2)",
          "process (sessionizer/engine.py:3)"], "engine (+ processor hooks)"),
        (["run (framework/node/node.py:1)", "_loop (framework/node/node.py:2)"],
         "node loop (other)"),
        (["run (framework/node/node.py:1)", "_commit_states (framework/node/node.py:2)",
          "helper (framework/node/stats.py:3)"], "ZooKeeper (commits, claims)"),
        (["x (framework/node/node.py:1)", "process (sessionizer/engine.py:2)"],
         "engine (+ processor hooks)"),
        (["commit (framework/node/node.py:1)", "commit_many (state/store.py:2)",
          "set (kazoo/client.py:3)"], "ZooKeeper (commits, claims)"),
        (["<module> (sessionizer:1)", "_find_and_load (<frozen importlib._bootstrap>:2)",
          "process (sessionizer/engine.py:3)"], STARTUP),
        (["process (sessionizer/engine.py:1)", "advance (state/tracker.py:2)",
          "__init__ (<string>:3)"], "engine (+ processor hooks)"),
        ([], NATIVE),
        (["f (somewhere/else.py:1)"], "other"),
    ],
)  # fmt: skip
def test_classify_takes_the_innermost_known_frame(frames: list[str], category: str) -> None:
    assert classify(frames) == category


def test_summarise_shares_of_the_loop_and_other_threads() -> None:
    profile = summarise(parse_raw(RAW.splitlines()), rounds=200)
    rows = {row["category"]: row for row in profile.rows()}
    assert rows["Kafka fetch + decode"]["loop_share"] == pytest.approx(0.25)
    assert rows["record decode"]["loop_share"] == pytest.approx(0.10)
    assert rows["engine (+ processor hooks)"]["loop_share"] == pytest.approx(0.075)
    assert rows["sink"]["loop_share"] == pytest.approx(0.05)
    # 100 of 200 rounds had a main-thread sample: idle half the time
    assert rows[IDLE]["loop_share"] == pytest.approx(0.5)
    # of the 95 samples of the running loop (start-up and the frameless sample left out)
    assert rows["Kafka fetch + decode"]["loop_busy_share"] == pytest.approx(50 / 95)
    assert rows[STARTUP]["loop_busy_share"] is None
    assert rows[STARTUP]["loop_share"] == pytest.approx(0.02)
    assert rows["ZooKeeper (commits, claims)"]["other_threads_cores"] == pytest.approx(0.15)
    assert rows["sink"]["other_threads_cores"] == pytest.approx(0.125)
    assert profile.threads["MainThread"] == 100
