"""The ZooKeeper state store on real ZooKeeper: fencing and the size guard."""

from __future__ import annotations

import pytest

from framework.kernel.paths import AppPaths
from framework.kernel.zookeeper import zookeeper_client
from state.errors import FencedError, StateTooLargeError
from state.record import IgnoreEntry, StreamState
from state.store import FencedStateStore
from state.zookeeper_store import ZooKeeperRecords

pytestmark = pytest.mark.integration
STREAM = "s.stream.0000"


def _take(client, path: str) -> int:
    """What the balancer does on taking a stream: rewrite the same bytes, bumping the version."""
    data, stat = client.get(path)
    return client.set(path, data, version=stat.version).version


def _created_and_taken(client, paths: AppPaths, streams: list[str]) -> dict[str, int]:
    """Each stream's state znode created, then taken: its epoch."""
    epochs = {}
    for stream in streams:
        client.create(paths.stream_state(stream), b"", makepath=True)
        epochs[stream] = _take(client, paths.stream_state(stream))
    return epochs


def test_a_stale_owner_cannot_commit_and_the_stored_state_is_unchanged(
    zk_hosts: str, app: str
) -> None:
    paths = AppPaths(app)
    with zookeeper_client(zk_hosts) as client:
        client.create(paths.stream_state(STREAM), b"", makepath=True)
        records = ZooKeeperRecords(client, paths.stream_states)
        old, new = FencedStateStore(records), FencedStateStore(records)

        old_epoch = _take(client, paths.stream_state(STREAM))
        state = old.load(STREAM, old_epoch)
        old.commit(STREAM, StreamState(STREAM, old_epoch, safe_offset=10, committed_offset=20))

        new_epoch = _take(client, paths.stream_state(STREAM))  # another node takes the stream
        taken = new.load(STREAM, new_epoch)
        assert (taken.safe_offset, taken.committed_offset) == (10, 20)
        new.commit(STREAM, StreamState(STREAM, new_epoch, safe_offset=30, committed_offset=40))
        before = client.get(paths.stream_state(STREAM))

        with pytest.raises(FencedError, match=STREAM) as raised:
            old.commit(STREAM, StreamState(STREAM, old_epoch, safe_offset=12, committed_offset=25))
        assert "another node has taken the stream" in str(raised.value)
        after = client.get(paths.stream_state(STREAM))
        assert after[0] == before[0] and after[1].version == before[1].version
        stored = StreamState.decode(after[0], stream=STREAM)
        assert (stored.safe_offset, stored.epoch) == (30, new_epoch)
        assert state.safe_offset == 0


def test_an_oversized_state_is_refused_with_a_clear_error_and_nothing_written(
    zk_hosts: str, app: str
) -> None:
    paths = AppPaths(app)
    with zookeeper_client(zk_hosts) as client:
        client.create(paths.stream_state(STREAM), b"", makepath=True)
        store = FencedStateStore(ZooKeeperRecords(client, paths.stream_states), limit_bytes=4096)
        epoch = _take(client, paths.stream_state(STREAM))
        store.load(STREAM, epoch)
        ignore = tuple(
            IgnoreEntry(f"198.51.100.{i % 250}|agent-{i}", i, i + 1, 100 + i, 100 + i)
            for i in range(2000)
        )
        huge = StreamState(STREAM, epoch, safe_offset=5, committed_offset=5000, ignore=ignore)
        with pytest.raises(StateTooLargeError, match=rf"{STREAM}.*over the limit of 4096 bytes"):
            store.commit(STREAM, huge)
        data, stat = client.get(paths.stream_state(STREAM))
        assert data == b"" and stat.version == epoch


def test_one_multi_operation_commits_many_streams_and_a_fenced_one_is_singled_out(
    zk_hosts: str, app: str
) -> None:
    paths = AppPaths(app)
    streams = [f"s.stream.{i:04d}" for i in range(5)]
    with zookeeper_client(zk_hosts) as client:
        records = ZooKeeperRecords(client, paths.stream_states)
        store = FencedStateStore(records)
        epochs = _created_and_taken(client, paths, streams)
        for stream in streams:
            store.load(stream, epochs[stream])

        def states(offset: int) -> list[StreamState]:
            return [StreamState(s, epochs[s], offset, offset) for s in streams]

        assert store.commit_many(states(10)) == dict.fromkeys(streams, None)
        assert {client.get(paths.stream_state(s))[1].version for s in streams} == {
            epochs[s] + 1 for s in streams
        }
        _take(client, paths.stream_state(streams[2]))  # another node takes one of them
        outcomes = store.commit_many(states(20))
        assert isinstance(outcomes.pop(streams[2]), FencedError)
        assert outcomes == dict.fromkeys(streams[:2] + streams[3:], None)
        for stream in streams[:2] + streams[3:]:
            data, _ = client.get(paths.stream_state(stream))
            assert StreamState.decode(data, stream=stream).committed_offset == 20
        data, _ = client.get(paths.stream_state(streams[2]))
        assert StreamState.decode(data, stream=streams[2]).committed_offset == 10


def test_an_assignment_reads_every_state_in_one_go_and_loads_need_no_more_round_trips(
    zk_hosts: str, app: str
) -> None:
    paths = AppPaths(app)
    streams = [f"s.stream.{i:04d}" for i in range(4)]
    with zookeeper_client(zk_hosts) as client:
        epochs = _created_and_taken(client, paths, streams[:3])  # the fourth has no znode
        store = FencedStateStore(ZooKeeperRecords(client, paths.stream_states))
        store.prepare(streams)
        client.stop()  # what the loads need was read by `prepare`: ZooKeeper is not asked again
        for stream in streams[:3]:
            assert store.load(stream, epochs[stream]) == StreamState.initial(stream, epochs[stream])
        with pytest.raises(FencedError, match=streams[3]):
            store.load(streams[3], 1)
