"""A live resize on real servers (docs/resize.md): the real Apache log through 2 nodes on 8
streams, a resize to 12 while the producer and the nodes run, a third node joining, one
`kill -9` during the migration; the output is exactly the batch definition, and with
`--delivery exactly-once` every session is in it once, with no de-duplication."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from framework.kernel.config import ConnectionConfig
from framework.kernel.zookeeper import app_client, zookeeper_client
from framework.provision import provision_streams
from framework.sessions import read_sessions
from framework.testing.cli import DATA, cli, cli_json
from framework.testing.members import wait_for
from framework.testing.nodes import NodeGroup, settled, streams_of
from framework.verify import expected_sessions, verify_sessions
from router.formats import parse_file
from router.ingest import produce_fragments
from router.producer import ProducerConfig, StreamProducer
from router.producer_registry import ProducerRegistry
from sessionizer.examples.weblog import WebSessions

pytestmark = pytest.mark.integration
WEBLOG = "sessionizer.examples.weblog:WebSessions"
SESSIONIZER = str(Path(sys.executable).with_name("sessionizer"))


@pytest.mark.parametrize("delivery", ["at-least-once", "exactly-once"])
def test_a_resize_from_8_to_12_streams_with_a_node_killed_keeps_the_output_exact(
    zk_hosts: str, kafka_bootstrap: str, app: str, tmp_path: Path, delivery: str
) -> None:
    connection = ConnectionConfig(zk_hosts, kafka_bootstrap, app)
    provision_streams(connection, 8)
    fragments = parse_file(DATA / "apache_logs", "apache")
    third = len(fragments) // 3
    config = ProducerConfig(kafka_bootstrap, app, 8, producer_id="web-1")
    flags = ("--delivery", delivery)
    with NodeGroup(connection, tmp_path, WEBLOG) as group, zookeeper_client(zk_hosts) as zk:
        group.start("n1", *flags)
        group.start("n2", *flags)
        with app_client(connection) as client:
            registry = ProducerRegistry(
                client, connection.paths, "web-1", streams_of(app, 8), poll_seconds=0.0
            )
            with StreamProducer(config, registry=registry) as producer:
                produce_fragments(producer, fragments[:third])
                resized = _resize(connection, 12)
                # The sources' owners are stopped while the producer switches and sends on, so
                # moved keys' fragments reach the new streams before any migration-done
                # marker can: the targets must hold them back, whatever the scheduling.
                for name in ("n1", "n2"):
                    group.nodes[name].send(signal.SIGSTOP)
                at = third
                while producer.config.num_streams == 8 and at < 2 * third:
                    produce_fragments(producer, fragments[at : at + 100])
                    at += 100
                produce_fragments(producer, fragments[at : at + 300])  # flushed: in the logs
                at += 300
                for name in ("n1", "n2"):
                    group.nodes[name].send(signal.SIGCONT)
                # A fleet may mix hot paths (both write the same bytes); status shows it.
                group.start("n3", *flags, env={"SESSIONIZER_HOT_PATH": "python"})
                # While the streams migrate: kill -9 n1.
                group.nodes["n1"].send(signal.SIGKILL)
                produce_fragments(producer, fragments[at:], end_of_input=True)
                assert producer.config.num_streams == 12
        streams = streams_of(app, 12)
        wait_for(lambda: settled(zk, connection, ["n2", "n3"], streams), 240, "the resize")
        conn = {"zk": zk_hosts, "bootstrap": kafka_bootstrap, "app": app}
        progress = wait_for(
            lambda: _settled_resize(cli_json("status", "--json", **conn)), 60, "status: settled"
        )
        code, table, _err = cli("status", **conn)
        settings = cli_json("status", "--json", **conn)["settings"]
        (n2_path,) = [e["path"] for e in group.nodes["n2"].events("hot_path")]
        barriers = [e for n in group.nodes for e in group.nodes[n].events("resize_barrier")]
        settled_streams = {
            e["stream"] for n in group.nodes for e in group.nodes[n].events("resize_settled")
        }
    written = read_sessions(kafka_bootstrap, app, deduplicate=False)
    result = verify_sessions(written, expected_sessions(fragments, WebSessions()), len(fragments))
    moved = sum(e["sessions"] for e in barriers)
    print(
        f"\nresize 8 -> 12 with a kill -9, {delivery}: {result.line()}; "
        f"barriers logged {len(barriers)}, sessions migrated {moved}, "
        f"new streams settled {len(settled_streams)}, "
        f"held back {progress and progress['held_total']}"
    )
    assert result.exact, result.line()
    if delivery == "exactly-once":
        assert result.duplicates == 0, result.line()
    assert {e["stream"] for e in barriers} == set(streams_of(app, 8))  # every old stream
    assert moved > 0 and settled_streams == set(streams[8:])
    assert resized == {"app": app, "streams": 12, "from": 8, "created": 4, "epoch": 1}
    assert progress is not None and progress["sessions_moved"] > 0 and progress["held"] == 0
    assert progress["held_total"] > 0  # the new streams held back moved keys' fragments
    assert code == 0 and "resize 8 -> 12 (epoch 1): 8/8 streams migrated, 4/4 settled" in table
    hot_paths = "+".join(sorted({n2_path, "python"}))  # n2's, as it logged it, and n3's
    assert settings == {"delivery": delivery, "hot_path": hot_paths}
    assert f"delivery: {delivery}, hot_path: {hot_paths}" in table
    assert f"{progress['sessions_moved']} sessions moved" in table


def _resize(connection: ConnectionConfig, count: int) -> dict[str, Any]:
    """`sessionizer streams resize --count COUNT`, the console script in a subprocess."""
    servers = ["--zk", connection.zk, "--bootstrap", connection.bootstrap, "--app", connection.app]
    began = time.monotonic()
    result = subprocess.run(
        [SESSIONIZER, "streams", "resize", "--count", str(count), *servers],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    print(f"\nstreams resize --count {count}: {time.monotonic() - began:.1f} s")
    printed: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return printed


def _settled_resize(status: dict[str, Any]) -> dict[str, Any] | None:
    """`status --json`'s resize section once every stream is migrated or settled."""
    progress = status["resize"]
    assert progress["from"] == 8 and progress["to"] == 12, progress
    done = progress["migrated"] == 8 and progress["settled"] == 4
    return progress if done else None
