"""`LoadReporter.publish` on a real ZooKeeper: pipelined, and writing only what changed.

A node publishes the loads of all the streams it holds every second; the writes
went one round trip per stream through the node's loop.  Now one round trip
reads the streams published for the first time, and one writes what changed.
"""

from __future__ import annotations

from balancer.load import LoadReporter, StreamLoad, read_loads
from framework.kernel.paths import AppPaths
from framework.kernel.zookeeper import zookeeper_client
from framework.testing.members import provision_streams as register_streams
from framework.testing.members import stream_names

STREAMS = 6


def test_publish_writes_new_and_changed_loads_and_keeps_a_move_time(
    zk_hosts: str, app: str
) -> None:
    paths, names = AppPaths(app), stream_names(app, STREAMS)
    with zookeeper_client(zk_hosts) as zk:
        register_streams(zk, paths, names)
        # A previous owner moved stream 0 away at 123.0: the new owner keeps that time.
        zk.create(paths.stream_load(names[0]), StreamLoad(5.0, 0.1, "old", 123.0).encode())
        reporter = LoadReporter(zk, paths, "n1", window=1.0, publish_interval=1.0)
        reporter.meter.sample(0.0, {s: 0 for s in names}, 0.0)
        reporter.meter.sample(2.0, {s: 20 * (i + 1) for i, s in enumerate(names)}, 1.0)

        assert reporter.publish(2.0, names) == STREAMS
        loads = read_loads(zk, paths)
        assert {s: (load.rate, load.node) for s, load in loads.items()} == {
            s: (10.0 * (i + 1), "n1") for i, s in enumerate(names)
        }
        assert loads[names[0]].moved_at == 123.0
        assert all(loads[s].moved_at is None for s in names[1:])
        versions = {s: zk.exists(paths.stream_load(s)).version for s in names}

        # The same rates again: nothing is written.
        reporter.meter.sample(4.0, {s: 20 * (i + 1) * 2 for i, s in enumerate(names)}, 2.0)
        assert reporter.publish(4.0, names) == 0
        assert {s: zk.exists(paths.stream_load(s)).version for s in names} == versions

        # Stream 1 doubles its rate; stream 5 is no longer held: one write.
        counts = {s: 20 * (i + 1) * 3 for i, s in enumerate(names)}
        counts[names[1]] += 400
        reporter.meter.sample(6.0, counts, 3.0)
        assert reporter.publish(6.0, names[:5]) == 1
        assert zk.exists(paths.stream_load(names[1])).version == versions[names[1]] + 1
        assert read_loads(zk, paths, [names[1]])[names[1]].rate > 20.0
