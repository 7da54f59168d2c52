"""A node runs Python's collector as `NodeConfig.gc_threshold` says: start-up's objects
frozen and the young generation scanned every `gc_threshold` allocations, or, with None,
as Python sets it; `sessionizer produce` and `generate` run it as a node does by default.
Each case runs in a child process, so this process's collector is left alone."""

from __future__ import annotations

import subprocess
import sys

import pytest

from framework.kernel.config import ConnectionConfig
from framework.kernel.errors import ConfigError
from framework.node.collector import COLLECTOR_THRESHOLD
from framework.node.config import NodeConfig
from framework.testing.cli import DATA

CONNECTION = ConnectionConfig("localhost:2181", "localhost:9092")

_CHILD = """
import gc, sys
from framework.kernel.config import ConnectionConfig
from framework.node.config import NodeConfig
from framework.node.runner import run_until_signalled

class Node:  # what run_until_signalled uses of a node
    def __init__(self, config):
        self.config = config
    def run(self):
        print(gc.get_threshold()[0], gc.get_freeze_count() > 0)
    def stop(self):
        pass

threshold = None if sys.argv[1] == "None" else int(sys.argv[1])
config = NodeConfig(ConnectionConfig("z:1", "k:1"), "m:C", gc_threshold=threshold)
sys.exit(run_until_signalled(Node(config)))
"""


def _collector_in_a_node(threshold: int | None) -> str:
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, str(threshold)], capture_output=True, text=True, check=True
    )
    return child.stdout.strip().splitlines()[-1]  # after the node's log lines


def test_a_node_freezes_start_up_and_scans_young_objects_less_often() -> None:
    assert NodeConfig(CONNECTION).gc_threshold == 100_000
    assert _collector_in_a_node(10_000) == "10000 True"


def test_without_a_threshold_the_collector_is_pythons() -> None:
    assert _collector_in_a_node(None) == f"{700} False"


def test_a_threshold_below_one_is_refused() -> None:
    with pytest.raises(ConfigError, match="gc_threshold must be >= 1 or None, got 0"):
        NodeConfig(CONNECTION, gc_threshold=0)


_PRODUCE_CHILD = """
import contextlib, gc, sys, types
import framework.commands.produce as produce
from framework.cli import main

@contextlib.contextmanager
def no_cluster(connection, args):
    yield types.SimpleNamespace(poll=lambda: None)

def collector(*args, **kwargs):
    print(gc.get_threshold()[0], gc.get_freeze_count() > 0)
    sys.exit(0)

produce._producer = no_cluster
produce.produce_lines = produce.produce_fragments = collector
main([*sys.argv[1:], "--zk", "z:1", "--bootstrap", "k:1", "--app", "a"])
"""


@pytest.mark.parametrize(
    "command",
    [["produce", str(DATA / "apache_logs"), "--format", "apache"], ["generate", "--sessions", "1"]],
    ids=["produce", "generate"],
)
def test_a_producer_runs_the_collector_as_a_node_does(command: list[str]) -> None:
    # Over kafka-python the collector walked every record in flight some 2,700 times per
    # 300,000 lines: about an eighth of the command's time (benchmarks/HOT_PATH.md, round 20).
    child = subprocess.run(
        [sys.executable, "-c", _PRODUCE_CHILD, *command], capture_output=True, text=True
    )
    assert child.returncode == 0, child.stderr[-2000:]
    assert child.stdout.strip().splitlines()[-1] == f"{COLLECTOR_THRESHOLD} True"
