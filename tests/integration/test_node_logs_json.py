"""A node's stderr with `--log-format json` is JSON, line by line, also what its libraries log.

Two nodes (one per Kafka client) run against a private cluster; then the broker
dies, then ZooKeeper, so librdkafka, kafka-python and kazoo all have something
to say. Every line must parse, and a library repeating itself (librdkafka logs
~20 reconnect failures a second per client) prints each line once per interval.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from framework.cluster import LocalCluster, wait_until
from framework.kernel import compiled
from framework.logging import REPEAT_INTERVAL_S
from framework.testing.cli import cli_json
from framework.testing.hot_path_runs import require_compiled

pytestmark = pytest.mark.integration
SESSIONIZER = str(Path(sys.executable).with_name("sessionizer"))
CLIENTS = ("confluent", "kafka-python")
LIBRARIES = ("librdkafka", "kafka", "kazoo")
DEADLINE_S = 90.0
_RDKAFKA = re.compile(r"%\d\|")  # how librdkafka prints a line without a logger


def _lines(log: Path) -> list[str]:
    return log.read_text().splitlines()


def _is_json(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def _events(log: Path) -> list[dict[str, Any]]:
    """The log's lines that are complete JSON objects (a line may be half-written yet)."""
    events = []
    for line in _lines(log):
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def _logged(log: Path, logger: str) -> Callable[[], bool]:
    """Whether `logger` said anything yet, as JSON or as the plain text it would print unrouted
    (`kazoo.client: ...`, librdkafka's `%3|1764130000.123|FAIL|app-node#consumer-1| ...`)."""

    def check() -> bool:
        for line in _lines(log):
            try:
                if str(json.loads(line).get("logger", "")).startswith(logger):
                    return True
            except ValueError:
                if line.startswith(logger) or (logger == "librdkafka" and _RDKAFKA.match(line)):
                    return True
        return False

    return check


def _library(event: dict[str, Any]) -> bool:
    return str(event.get("logger", "")).startswith(LIBRARIES)


def test_every_line_of_a_node_run_is_json_also_while_the_servers_are_down(
    local_cluster: Callable[..., LocalCluster], app: str, tmp_path: Path
) -> None:
    cluster = local_cluster(zookeepers=1, brokers=1)
    conn = {"zk": cluster.zk_connect, "bootstrap": cluster.bootstrap, "app": app}
    cli_json("streams", "create", "--count", "2", **conn)
    logs = {client: tmp_path / f"{client}.log" for client in CLIENTS}
    nodes: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for client, log in logs.items():
            with log.open("wb") as stderr:
                nodes[client] = subprocess.Popen(
                    [SESSIONIZER, "node", "--processor", "sessionizer.examples.weblog:WebSessions",
                     "--id", client, "--kafka-client", client, "--log-format", "json",
                     *(f"--{k}={v}" for k, v in conn.items())],
                    stdout=subprocess.DEVNULL, stderr=stderr,
                )  # fmt: skip
        for log in logs.values():
            wait_until(lambda log=log: any(e["event"] == "joined" for e in _events(log)),
                       DEADLINE_S, f"{log.stem} to join")  # fmt: skip

        cluster.kill("kafka1")
        down = time.monotonic()
        wait_until(_logged(logs["confluent"], "librdkafka"), DEADLINE_S, "librdkafka's lines")
        wait_until(_logged(logs["kafka-python"], "kafka."), DEADLINE_S, "kafka-python's lines")
        cluster.kill("zk1")
        for client, log in logs.items():
            wait_until(_logged(log, "kazoo"), DEADLINE_S, f"kazoo's lines from {client}")
        outage = time.monotonic() - down
        for node in nodes.values():
            node.terminate()
        for client, node in nodes.items():
            assert node.wait(timeout=DEADLINE_S) is not None, client
    finally:
        for node in nodes.values():
            node.kill()
            node.wait()

    for client, log in logs.items():
        lines = _lines(log)
        unrouted = [line for line in lines if not _is_json(line)]
        assert lines and not unrouted, f"{client}: {unrouted[:5]}"
        events = [json.loads(line) for line in lines]
        _ran_the_default_hot_path(client, events)
        library = [e for e in events if _library(e) and e["event"] != "library_lines_suppressed"]
        assert {str(e["logger"]).split(".")[0] for e in library} >= {
            "librdkafka" if client == "confluent" else "kafka",
            "kazoo",
        }
        # Once per (logger, what it says) and interval; the counts follow in summaries.
        said = Counter(
            (e["logger"], e.get("client"), re.sub(r"\d+", "#", e["event"])) for e in library
        )
        allowed = 1 + int(outage // REPEAT_INTERVAL_S)
        assert max(said.values()) <= allowed, said.most_common(3)


def _ran_the_default_hot_path(client: str, events: list[dict[str, Any]]) -> None:
    """A node says which hot path it runs; by default the compiled one, once it is built."""
    chosen = [e for e in events if e["event"] == "hot_path"]
    requested = os.environ.get(compiled.ENV) or compiled.AUTO
    assert [e["requested"] for e in chosen] == [requested], f"{client}: {chosen}"
    if requested != "python" and chosen[0]["path"] != "compiled":
        require_compiled(f"{client}: {chosen[0]['reason']}")
