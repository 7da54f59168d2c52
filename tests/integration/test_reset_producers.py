"""`sessionizer streams reset` keeps the stream's live producers (real ZooKeeper and Kafka).

Two producers join a stream and write watermarks; a reset at offset N writes a
state naming both with their clocks as of N (rebuilt from the log, or from the
state record and the log after its safe offset), and says so in its JSON.
"""

from __future__ import annotations

import pytest
from kafka import KafkaProducer
from kazoo.client import KazooClient

from framework.kernel.config import ConnectionConfig
from framework.kernel.watermark import JOINED, Watermark
from framework.provision import provision_streams
from framework.testing.cli import cli_json
from framework.testing.members import stream_names
from router.wire import encode_watermark
from state.record import StreamState

pytestmark = pytest.mark.integration

# a and b join and write watermarks; a ends at offset 6.
LOG = [
    Watermark(0, offset=0, producer="a", marker=JOINED),
    Watermark(0, offset=1, producer="b", marker=JOINED),
    Watermark(10_000, offset=2, producer="a"),
    Watermark(10_000, offset=3, producer="b"),
    Watermark(20_000, offset=4, producer="a"),
    Watermark(15_000, offset=5, producer="b"),
    Watermark(25_000, end=True, offset=6, producer="a"),
    Watermark(30_000, offset=7, producer="b"),
]


def _write(bootstrap: str, topic: str) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for record in LOG:
            value, headers = encode_watermark(record)
            producer.send(topic, value=value, headers=headers, timestamp_ms=record.timestamp_ms)
        producer.flush(timeout=30)
    finally:
        producer.close()


def test_a_reset_keeps_the_live_producers_as_of_its_offset(
    zk: KazooClient, zk_hosts: str, kafka_bootstrap: str, app: str
) -> None:
    connection = ConnectionConfig(zk_hosts, kafka_bootstrap, app)
    provision_streams(connection, 1)
    (stream,) = stream_names(app, 1)
    _write(kafka_bootstrap, stream)
    run = {"zk": zk_hosts, "bootstrap": kafka_bootstrap, "app": app}

    def stored() -> tuple[tuple[str, int | None], ...]:
        data, _ = zk.get(connection.paths.stream_state(stream))
        return StreamState.decode(data, stream=stream).producers

    # Never taken: its (empty) record is the initial state, no producers at offset 0.
    done = cli_json("streams", "reset", stream, "--from-offset", "6", **run)
    assert stored() == (("a", 20_000), ("b", 15_000))
    assert done["producers"] == [["a", 20_000], ["b", 15_000]]
    assert done["producers_from"] == {
        "state_record": True,
        "scanned_from": 0,
        "records_scanned": 6,
    }
    assert stored() == (("a", 20_000), ("b", 15_000))
    # From the record just written (safe offset 6) and the log after it: a ended at 6.
    done = cli_json("streams", "reset", stream, "--from-offset", "8", **run)
    assert done["producers"] == [["b", 30_000]]
    assert done["producers_from"] == {"state_record": True, "scanned_from": 6, "records_scanned": 2}
    assert stored() == (("b", 30_000),)
    # Back before that record's safe offset: read from the start of the log again.
    done = cli_json("streams", "reset", stream, "--from-offset", "2", **run)
    assert done["producers"] == [["a", None], ["b", None]]
    assert done["producers_from"]["state_record"] is False
    assert done["producers_from"] == {
        "state_record": False,
        "scanned_from": 0,
        "records_scanned": 2,
    }
    assert stored() == (("a", None), ("b", None))
