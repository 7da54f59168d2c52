"""`benchmarks.bare_relay` writes each session once, in order, as the records it stands for
are read: the floor of a node's Kafka I/O must not write early, late or twice."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from benchmarks.bare_relay import Relay, load_sessions


@given(
    sessions=st.integers(0, 300),
    records=st.integers(1, 1000),
    batches=st.lists(st.integers(1, 200), max_size=30),
)
def test_sessions_follow_the_records_read_and_each_is_written_once(
    sessions: int, records: int, batches: list[int]
) -> None:
    pending = [(f"k{i}".encode(), b"{}") for i in range(sessions)]
    sent: list[tuple[bytes, bytes]] = []
    relay = Relay(pending, records, sent.append)
    for count in batches:
        relay.on_batch(count)
        read = min(relay.read, records)
        # Never ahead of the records read, and at most one session behind them.
        assert len(sent) == sessions * read // records
    relay.finish()
    assert sent == pending and relay.written == sessions


def test_the_sessions_file_is_read_as_the_nodes_wrote_it(tmp_path: Path) -> None:
    path = tmp_path / "sessions"
    path.write_bytes(b'a1\t{"key": "x\\ty"}\nb2\t{}\n')
    assert load_sessions(path) == [(b"a1", b'{"key": "x\\ty"}'), (b"b2", b"{}")]
