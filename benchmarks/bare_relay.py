"""One bare relay process of one Kafka client: the floor of a node's own Kafka I/O.

    .venv/bin/python -m benchmarks.bare_relay --bootstrap HOST:PORT --start-at EPOCH
        --sessions FILE --to TOPIC [--kafka-client kafka-python|confluent] TOPIC...

Reads the topics as `benchmarks.bare_reader` does and, while it reads, writes the
sessions in FILE to TOPIC in proportion to the records read so far, with the
client's own producer and the node's output settings (`OutputProducerSettings`:
acks=all, idempotent, lz4, linger 20 ms); it is done once every record is read
and every session acknowledged.  FILE has one `session_id<TAB>JSON` line per
session, the bytes a node wrote: nothing is decoded, sessionized or encoded here.
So this is what any node of this client must spend on fetching the fragments and
writing the sessions, with an engine that costs nothing (`nodes_vs_bare`'s
`relay` column).  Prints one JSON line, as `bare_reader` does, with `written`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.bare_reader import process_arguments, read_confluent, read_kafka_python, report
from framework.kernel.transport import Transport
from sessionizer.kafka_sink import OutputProducerSettings

__all__ = ["Relay", "load_sessions", "main"]

Session = tuple[bytes, bytes]
"""(key, value) of one session record, as a node wrote it."""


def load_sessions(path: Path) -> list[Session]:
    """The (key, value) records of a `session_id<TAB>JSON` file."""
    records = []
    for line in path.read_bytes().splitlines():
        key, _, value = line.partition(b"\t")
        records.append((key, value))
    return records


class Relay:
    """Sends the sessions, a share at a time, as the records they stand for are read."""

    def __init__(self, sessions: list[Session], records: int, send: Callable[[Session], None]):
        self._sessions, self._records, self._send = sessions, max(1, records), send
        self.read = self.written = 0

    def on_batch(self, count: int) -> None:
        """`count` more records were read: send the sessions that many records stand for."""
        self.read += count
        self._send_until(len(self._sessions) * self.read // self._records)

    def finish(self) -> None:
        """Send what is left (the reader may have read fewer records than expected)."""
        self._send_until(len(self._sessions))

    def _send_until(self, due: int) -> None:
        for session in self._sessions[self.written : min(due, len(self._sessions))]:
            self._send(session)
            self.written += 1


def _settings(bootstrap: str) -> OutputProducerSettings:
    return OutputProducerSettings(
        bootstrap, "bench-bare-relay", 30.0, 1_000_000, largest_record=1_000_000, properties={}
    )


def relay_kafka_python(
    bootstrap: str, topics: list[str], start_at: float, sessions: list[Session], to: str
) -> tuple[int, float, int]:
    """(records, start time, sessions written) of kafka-python reading and writing."""
    from kafka import KafkaProducer

    producer = KafkaProducer(**_settings(bootstrap).kafka_python())
    try:
        producer.partitions_for(to)  # metadata before the clock starts
        relay = Relay(sessions, _expected(bootstrap, topics), lambda s: _kp_send(producer, to, s))
        records, started = read_kafka_python(bootstrap, topics, start_at, relay.on_batch)
        relay.finish()
        producer.flush()
        return records, started, relay.written
    finally:
        producer.close()


def _kp_send(producer: Any, topic: str, session: Session) -> None:
    producer.send(topic, value=session[1], key=session[0], partition=0)


def relay_confluent(
    bootstrap: str, topics: list[str], start_at: float, sessions: list[Session], to: str
) -> tuple[int, float, int]:
    """(records, start time, sessions written) of confluent-kafka reading and writing."""
    from confluent_kafka import Producer

    producer = Producer(_settings(bootstrap).confluent())
    producer.list_topics(to, timeout=10)

    def send(session: Session) -> None:
        try:
            producer.produce(to, session[1], session[0], partition=0)
        except BufferError:  # the local queue is full: serve it, then once more
            producer.poll(0.1)
            producer.produce(to, session[1], session[0], partition=0)

    relay = Relay(sessions, _expected(bootstrap, topics), send)

    def on_batch(count: int) -> None:
        relay.on_batch(count)
        producer.poll(0)  # delivery reports, as a node's sink serves them

    records, started = read_confluent(bootstrap, topics, start_at, on_batch)
    relay.finish()
    left = producer.flush(60)
    if left:
        raise RuntimeError(f"bare confluent relay: {left} sessions unacknowledged after 60 s")
    return records, started, relay.written


def _expected(bootstrap: str, topics: list[str]) -> int:
    from framework.progress import end_offsets

    return sum(end_offsets(bootstrap, topics).values())


def main(argv: list[str] | None = None) -> None:
    """Read the topics and write the sessions once; print what it took."""
    parser = process_arguments(__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=Path, required=True)
    parser.add_argument("--to", required=True, help="the topic to write the sessions to")
    args = parser.parse_args(argv)
    client: Transport = args.kafka_client
    sessions = load_sessions(args.sessions)
    relay = relay_kafka_python if client == "kafka-python" else relay_confluent
    records, started, written = relay(args.bootstrap, args.topics, args.start_at, sessions, args.to)
    report(client, records, started, written=written)


if __name__ == "__main__":
    main()
