"""An aborted transaction's records in `<app>.sessions` are not output: `sessions` skips them."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Producer

from framework.kernel.config import ConnectionConfig
from framework.provision import provision_streams
from framework.testing.cli import cli
from router.naming import sessions_topic

pytestmark = pytest.mark.integration


def _session(session_id: str) -> bytes:
    fields = {"key": "k", "stream": "s", "first_ts": 0, "last_ts": 1000, "fragments": 1}
    return json.dumps({"session_id": session_id, **fields}).encode()


def _transaction(producer: Producer, topic: str, ids: list[str], *, commit: bool) -> None:
    producer.begin_transaction()
    for session_id in ids:
        producer.produce(topic, key=session_id.encode(), value=_session(session_id))
    if commit:
        producer.commit_transaction(30)
    else:
        producer.flush(30)  # the records are in the log before the abort marker follows
        producer.abort_transaction(30)


def test_sessions_of_an_aborted_transaction_are_not_counted(
    zk_hosts: str, kafka_bootstrap: str, app: str
) -> None:
    connection = ConnectionConfig(zk_hosts, kafka_bootstrap, app)
    provision_streams(connection, 2)
    topic = sessions_topic(app)
    producer = Producer(
        {"bootstrap.servers": kafka_bootstrap, "transactional.id": f"test-{uuid.uuid4().hex}"}
    )
    producer.init_transactions(30)
    _transaction(producer, topic, ["kept-1", "kept-2"], commit=True)
    _transaction(producer, topic, ["aborted-1", "aborted-2", "aborted-3"], commit=False)
    _transaction(producer, topic, ["kept-3"], commit=True)
    code, out, err = cli(
        "sessions", "--json", "--all", zk=zk_hosts, bootstrap=kafka_bootstrap, app=app
    )
    assert code == 0, err
    ids = [json.loads(line)["session_id"] for line in out.splitlines()]
    assert ids == ["kept-1", "kept-2", "kept-3"]
