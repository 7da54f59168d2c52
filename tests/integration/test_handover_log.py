"""The handover log on real Kafka, through either client: a take reads the records of many
streams forward in one pass, seeking past a long run of other records."""

from __future__ import annotations

import pytest

from framework.kafka.keyed_log import SEEK_PAST
from framework.kernel.config import ConnectionConfig
from framework.provision import provision_streams
from router.provisioning import handover_topic
from state.errors import StateError
from state.handover_kafka import open_handover_log

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_the_records_of_many_streams_are_read_in_one_pass_past_a_long_gap(
    client: str, zk_hosts: str, kafka_bootstrap: str, app: str
) -> None:
    provision_streams(ConnectionConfig(zk_hosts, kafka_bootstrap, app), 1)
    log = open_handover_log(
        client, kafka_bootstrap, handover_topic(app), client_id=f"{app}-test", properties={}
    )
    try:
        first = log.write_many([("s.0", b"zero"), ("s.1", b"one")], 30)
        others = log.write_many([("other", b"x")] * (SEEK_PAST + 50), 30)
        last = log.write_many([("s.2", b"two")], 30)
        offsets = [w for w in [*first, *others, *last] if isinstance(w, int)]
        assert len(offsets) == SEEK_PAST + 53, "every record written"
        wanted = {"s.2": offsets[-1], "s.0": offsets[0], "s.1": offsets[1]}
        assert log.read_many(wanted, 30) == {"s.0": b"zero", "s.1": b"one", "s.2": b"two"}
        assert log.read_many({"s.0": offsets[1]}, 30) == {"s.0": None}, "another stream's record"
        past_the_end = log.read_many({"s.3": offsets[-1] + 1}, 1.0)["s.3"]
        assert isinstance(past_the_end, StateError) and "not read within 1 s" in str(past_the_end)
    finally:
        log.close()
