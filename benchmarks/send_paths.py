"""The Python each producer path adds per record, the client's own call replaced by a no-op.

    .venv/bin/python -m benchmarks.send_paths [--records 200000] [--rounds 9]

No broker: librdkafka's `produce` (confluent) is swapped for a Python function that
does nothing, so what is timed is the project's frames around it, per record, in
CPU ns (best of `--rounds`, paths interleaved):

- `produce alone`: the no-op called as the bare producer calls `produce`;
- `fragments (FragmentPath.queue)`: how `StreamProducer` sends an encoded fragment
  (`router.fragment_path`: the client's `topic_sender`, the count, the watermark policy);
- `watermarks (transport send)`: the general path (`KafkaTransport.send`, then the
  client layer's `send`), which watermarks and markers take;
- `sink (send with a token)`: how a node's sink sends a finished session.

The figures compare paths within one run; benchmarks/HOT_PATH.md has them before
and after the change that gave fragments their own path.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks.common import progress, write_json
from benchmarks.tables import show
from framework.kafka.confluent import ConfluentProducer
from router.producer import ProducerConfig, StreamProducer

__all__ = ["main"]


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


class _Token:
    """What a sink sends with each record (its session)."""


def _paths(records: int) -> dict[str, Callable[[], None]]:
    """Each path as a loop over `records` records, on producers whose produce is the no-op."""
    config = ProducerConfig("127.0.0.1:1", "bench", 64, kafka_client="confluent")
    producer = StreamProducer(config, verify=False)
    sink = ConfluentProducer({"bootstrap.servers": "127.0.0.1:1"})
    for client in (producer._transport._producer, sink):  # type: ignore[attr-defined]
        client._produce = _noop
    producer._path = producer._fragment_path(64)  # over the no-op now
    items = [(i % 64, b"k%d" % i, b"v" * 200, 1_700_000_000_000 + i) for i in range(records)]
    token = _Token()

    def produce_alone() -> None:
        for _, key, value, stamp in items:
            _noop("bench.stream.0001", value, key, 0, timestamp=stamp)

    def fragments() -> None:
        queue = producer._path.queue
        for stream, key, value, stamp in items:
            queue(stream, key, value, stamp)

    def watermarks() -> None:
        send = producer._transport.send
        for stream, key, value, stamp in items:
            send(stream, key, value, stamp, None)

    def sink_path() -> None:
        send = sink.send
        for _, key, value, _ in items:
            send("bench.sessions", key, value, token=token)

    return {
        "produce alone": produce_alone,
        "fragments (FragmentPath.queue)": fragments,
        "watermarks (transport send)": watermarks,
        "sink (send with a token)": sink_path,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Time every path, print and write benchmarks/out/send_paths.json."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args(argv)
    paths = _paths(args.records)
    best = dict.fromkeys(paths, float("inf"))
    for round_ in range(args.rounds):
        progress(f"round {round_ + 1}/{args.rounds}")
        for name, loop in paths.items():
            started = time.process_time()
            loop()
            best[name] = min(best[name], (time.process_time() - started) / args.records * 1e9)
    rows = [{"path": name, "cpu_ns_per_record": round(ns)} for name, ns in best.items()]
    show(
        "Python per record of each send path (CPU ns, best of rounds)",
        rows,
        ["path", "cpu_ns_per_record"],
    )
    payload = {"benchmark": "send_paths", "params": vars(args), "rows": rows}
    progress(f"results written to {write_json('send_paths', payload)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
