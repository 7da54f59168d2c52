"""A paused broker does not stop `StreamProducer` on confluent-kafka while its queue has room.

librdkafka's own queue holds 100,000 records; `StreamProducer` lets it hold 1,000,000
(`router.producer.CONFLUENT_QUEUE_MESSAGES`), so that a pause of the broker does not
idle the producer (benchmarks/HOT_PATH.md, round 22).  The broker is SIGSTOPped while
more records than librdkafka's default are sent, then resumed: every fragment lands
once.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

import pytest

from framework.cluster import LocalCluster
from framework.kernel.config import ConnectionConfig
from framework.provision import provision_streams
from framework.testing.members import wait_for
from router.fragment import ParsedFragment
from router.naming import stream_name
from router.producer import ProducerConfig, StreamProducer
from router.readback import read_topics
from router.wire import encode_fragment

pytestmark = pytest.mark.integration
STREAMS = 4
SENT = 150_000  # more than librdkafka's default queue holds, fewer than the producer's
BASE_MS = 1_700_000_000_000


def test_a_paused_broker_does_not_stop_the_confluent_producer_before_its_queue_is_full(
    local_cluster: Callable[..., LocalCluster], app: str
) -> None:
    cluster = local_cluster(zookeepers=1, brokers=1)
    provision_streams(ConnectionConfig(cluster.zk_connect, cluster.bootstrap, app), STREAMS)
    fragments = [ParsedFragment(f"user-{i % 997}", BASE_MS + i, {"n": i}) for i in range(SENT)]
    config = ProducerConfig(cluster.bootstrap, app, STREAMS, kafka_client="confluent")
    queued = threading.Event()
    raised: list[BaseException] = []

    with StreamProducer(config) as producer:

        def send_all() -> None:  # the only thread that uses the producer until it is done
            try:
                for fragment in fragments:
                    producer.send(fragment)
            except BaseException as exc:  # reported by the assertion below
                raised.append(exc)
            finally:
                queued.set()

        sender = threading.Thread(target=send_all, name="sender", daemon=True)
        cluster.pause("kafka1")
        try:
            sender.start()
            # With librdkafka's 100,000 the 100,001st send waits for the broker.
            wait_for(queued.is_set, 60, f"{SENT:,} sends queued while the broker is paused")
        finally:
            cluster.resume("kafka1")
            sender.join(timeout=120)
        assert not raised and not sender.is_alive()
        producer.flush()
        watermarks = producer.stats.watermarks

    records = read_topics(cluster.bootstrap, [stream_name(app, i) for i in range(STREAMS)])
    landed = Counter((r.key, r.value) for rs in records.values() for r in rs if r.key)
    assert landed == Counter(encode_fragment(f) for f in fragments)  # each once, none lost
    assert sum(map(len, records.values())) == SENT + watermarks
