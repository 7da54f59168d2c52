"""The start of a live resize on real servers (docs/resize.md, steps 1 and 2): the command's
library half grows the topics, marks every stream and records the resize; a running named
producer sees it, marks the old streams and routes by the new count from then on.

The command's refusals, each one line before it touches anything, are checked here on
real servers too; the nodes' half is tests/integration/test_resize_live.py's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from framework.kernel.config import ConnectionConfig
from framework.kernel.paths import AppPaths
from framework.kernel.watermark import JOINED, Watermark
from framework.kernel.zookeeper import app_client
from framework.testing.cli import DATA, cli, cli_json
from framework.testing.members import wait_for
from router.fragment import ParsedFragment
from router.hashing import stream_for_key
from router.naming import stream_name
from router.producer import ProducerConfig, StreamProducer
from router.producer_registry import ProducerRegistry
from router.readback import read_topics
from router.registry import streams_for
from router.resize import read_resize
from router.resize_command import start_resize
from router.resize_wire import Epoch, ResizeMarker, decode_control
from router.wire import decode_record

pytestmark = pytest.mark.integration


def test_a_running_producer_switches_to_the_new_count_after_marking_the_old_streams(
    zk_hosts: str, kafka_bootstrap: str, app: str
) -> None:
    cli_json("streams", "create", "--count", "2", zk=zk_hosts, bootstrap=kafka_bootstrap, app=app)
    connection = ConnectionConfig(zk_hosts, kafka_bootstrap, app)
    names = [stream_name(app, i) for i in range(2)]
    config = ProducerConfig(kafka_bootstrap, app, 2, producer_id="web-1")
    with app_client(connection) as client:
        registry = ProducerRegistry(client, connection.paths, "web-1", names, poll_seconds=0.0)
        with StreamProducer(config, registry=registry) as producer:
            for i in range(300):
                producer.send(ParsedFragment(f"k{i % 40}", 1_000 * i, {"i": i}))
            producer.flush()
            epoch = start_resize(connection, 3)
            for i in range(300, 1_200):
                producer.send(ParsedFragment(f"k{i % 40}", 1_000 * i, {"i": i}))
            producer.end_of_input()
            assert producer.config.num_streams == 3
        assert read_resize(client, connection.paths.active_streams) == Epoch(1, 2, 3) == epoch
        assert streams_for(client, connection.paths.active_streams, app) == 3
        assert sorted(client.get_children(connection.paths.active_streams)) == [
            stream_name(app, i) for i in range(3)
        ]
    logs = _items(kafka_bootstrap, [stream_name(app, i) for i in range(3)])
    for index in range(3):
        items = logs[stream_name(app, index)]
        markers = [i for i, item in enumerate(items) if isinstance(item, ResizeMarker)]
        if index < 2:  # an old stream: the start marker, then the producer's, then only M
            assert [items[i].producer for i in markers] == [None, "web-1"]
            after = [item for item in items[markers[1] :] if isinstance(item, ParsedFragment)]
            assert after and all(stream_for_key(f.key, 3) == index for f in after)
        else:  # the new stream: its start marker, the producer's `joined`, keys of stream 2
            assert markers == [0]
            assert any(isinstance(x, Watermark) and x.marker == JOINED for x in items)
            fragments = [item for item in items if isinstance(item, ParsedFragment)]
            assert fragments and all(stream_for_key(f.key, 3) == 2 for f in fragments)


def test_a_producer_whose_input_is_quiet_marks_the_old_streams_without_another_line(
    zk_hosts: str, kafka_bootstrap: str, app: str, tmp_path: Path
) -> None:
    # `tail -f access.log | sessionizer produce -` on a quiet log: the migration waits for
    # every live producer's `resize` marker (docs/resize.md, step 3), so a producer that
    # looked at the registry only as lines came would stall the resize until the log moved.
    servers = {"zk": zk_hosts, "bootstrap": kafka_bootstrap, "app": app}
    cli_json("streams", "create", "--count", "2", **servers)
    lines = (DATA / "apache_logs").read_text(encoding="utf-8").splitlines(keepends=True)
    command = [
        str(Path(sys.executable).with_name("sessionizer")), "produce", "-", "--format", "apache",
        "--producer-id", "tail-1", "--json", "--zk", zk_hosts, "--bootstrap", kafka_bootstrap,
        "--app", app,
    ]  # fmt: skip
    old = [stream_name(app, i) for i in range(2)]
    with (tmp_path / "produce.err").open("w") as errors:
        process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, text=True
        )
    try:
        assert process.stdin is not None
        process.stdin.write("".join(lines[:100]))
        process.stdin.flush()
        wait_for(lambda: _joined(kafka_bootstrap, old), 60, "the producer's joined markers")
        cli_json("streams", "resize", "--count", "3", **servers)
        wait_for(
            lambda: _marked(kafka_bootstrap, old, "tail-1"),
            60,
            "the quiet producer's resize markers on the old streams",
            interval=0.5,
        )
        out, _ = process.communicate("".join(lines[100:400]), timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)
    assert process.returncode == 0, (tmp_path / "produce.err").read_text()[-2000:]
    assert json.loads(out.strip().splitlines()[-1])["sent"] == 400
    new = stream_name(app, 2)
    items = _items(kafka_bootstrap, [new])[new]
    assert any(isinstance(item, ParsedFragment) for item in items)  # the rest routed by 3


def _items(bootstrap: str, topics: list[str]) -> dict[str, list[Any]]:
    """Every topic's records, decoded: resize markers, fragments and watermarks."""
    return {
        topic: [
            decode_control(r.key, r.value, r.headers, r.timestamp, r.offset)
            or decode_record(r.key, r.value, r.headers, r.timestamp, offset=r.offset)
            for r in records
        ]
        for topic, records in read_topics(bootstrap, topics).items()
    }


def _joined(bootstrap: str, topics: list[str]) -> bool:
    return all(
        any(isinstance(i, Watermark) and i.marker == JOINED for i in items)
        for items in _items(bootstrap, topics).values()
    )


def _marked(bootstrap: str, topics: list[str], producer: str) -> bool:
    return all(
        any(isinstance(i, ResizeMarker) and i.producer == producer for i in items)
        for items in _items(bootstrap, topics).values()
    )


def test_the_command_refuses_what_it_cannot_start_with_one_line(
    zk_hosts: str, kafka_bootstrap: str, app: str
) -> None:
    servers = {"zk": zk_hosts, "bootstrap": kafka_bootstrap, "app": app}

    def refused(count: int) -> str:
        code, out, err = cli("streams", "resize", "--count", str(count), **servers)
        errors = [line for line in err.splitlines() if ": error: " in line]
        assert code == 2 and out == "" and len(errors) == 1, err[-2000:]
        return errors[0]

    assert "has no streams; run `sessionizer streams create --count N`" in refused(3)
    cli_json("streams", "create", "--count", "2", **servers)
    assert "already has 2 streams: nothing to resize" in refused(2)
    assert "--count 1 would shrink it: shrinking is not offered by the command" in refused(1)
    resized = cli_json("streams", "resize", "--count", "3", **servers)
    assert resized == {"app": app, "streams": 3, "from": 2, "created": 1, "epoch": 1}
    # No node runs: the resize cannot settle, and the next one waits for it.
    assert "resize 2 -> 3 (epoch 1) is not settled yet (0/2 streams migrated" in refused(4)
    with app_client(ConnectionConfig(zk_hosts, kafka_bootstrap, app)) as client:
        assert streams_for(client, AppPaths(app).active_streams, app) == 3
