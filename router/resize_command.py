"""`sessionizer streams resize --count M`: step 1 of docs/resize.md.

In order, so that nothing reads a stream before it exists and no producer switches
before every stream has its start marker:

1. growing: the new stream topics, then their `active_streams/<stream>` znodes;
2. a start marker (`resize` without a producer) on every stream 0..max(N, M)-1,
   flushed;
3. the resize recorded in `active_streams` (`router.resize.record_resize`), the count
   becoming M: producers switch from here on.
"""

from __future__ import annotations

import time

from framework.kernel.config import ConnectionConfig
from framework.kernel.errors import ConfigError
from framework.kernel.zookeeper import app_client
from router.naming import stream_name
from router.producer import ProducerConfig
from router.producer_transport import open_transport
from router.provisioning import TopicPlan, grow_stream_topics
from router.registry import add_stream_znodes, streams_for
from router.resize import markers, read_resize, record_resize
from router.resize_wire import Epoch

__all__ = ["start_resize"]


def start_resize(connection: ConnectionConfig, count: int, replication: int = 1) -> Epoch:
    """Start a live resize of the app to `count` streams; return its epoch."""
    paths = connection.paths
    with app_client(connection) as client:
        old = streams_for(client, paths.active_streams, connection.app)
        if count <= old:
            raise ConfigError(
                f"app {connection.app!r} has {old} streams: a live resize grows it "
                f"(--count {count}); shrinking is not offered by the command yet (docs/resize.md)"
            )
        previous = read_resize(client, paths.active_streams)
        epoch = Epoch((previous.epoch if previous else 0) + 1, old, count)
        plan = TopicPlan(connection.app, count, replication)
        grow_stream_topics(connection.bootstrap, plan, properties=connection.kafka_config)
        add_stream_znodes(client, paths.active_streams, plan.stream_topics()[old:])
        _write_start_markers(connection, epoch)
        recorded = record_resize(client, paths.active_streams, count)
    if recorded != epoch:
        raise ConfigError(f"another resize was recorded meanwhile: {recorded}, not {epoch}")
    return epoch


def _write_start_markers(connection: ConnectionConfig, epoch: Epoch) -> None:
    streams = max(epoch.old, epoch.new)
    config = ProducerConfig(
        connection.bootstrap,
        connection.app,
        streams,
        kafka_config=connection.kafka_config,
        kafka_client=connection.kafka_client,
    )
    transport = open_transport(config, [stream_name(connection.app, i) for i in range(streams)])
    try:
        transport.prepare(verify=False)
        for index, key, value, headers, stamp in markers(epoch, None, int(time.time() * 1000)):
            transport.send(index, key, value, stamp, headers)
        failures = transport.flush(30.0).failures
        if failures:
            raise ConfigError(f"writing the start markers failed: {failures[:3]}")
    finally:
        transport.close(timeout=5)
