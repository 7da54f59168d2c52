"""`StreamProducer` against a bare `KafkaProducer` with the same settings, same fragments.

    .venv/bin/python -m benchmarks.producer_throughput [--fragments 200000] [--streams 16]

Both send the same generated fragments, pre-generated before timing, to the same
stream topics (the bare producer with keys and values already encoded and the
stream already chosen, so the difference is the cost of routing, encoding,
watermarks and counting).  Each is timed from the first send to the end of its
final flush (every record acknowledged, acks=all).
"""

from __future__ import annotations

import argparse
import uuid
from itertools import islice

from benchmarks.common import print_table, progress, servers, write_json
from benchmarks.producer_workloads import PRODUCERS
from framework.config import ConnectionConfig
from framework.provision import provision_streams
from router.generator import generate_fragments
from router.producer import ProducerConfig

__all__ = ["main"]


def _fragments(count: int) -> list:
    # Generate sessions until there are enough fragments (about 3.6 per session).
    return list(islice(generate_fragments(count // 2 + 1, seed=42), count))


def main(argv: list[str] | None = None) -> None:
    """Run both producers and print fragments/s side by side."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fragments", type=int, default=200_000)
    parser.add_argument("--streams", type=int, default=16)
    args = parser.parse_args(argv)
    fragments = _fragments(args.fragments)
    with servers() as cluster:
        results = []
        for name, run in PRODUCERS:
            app = f"bench{uuid.uuid4().hex[:8]}"
            provision_streams(ConnectionConfig(cluster.zk, cluster.bootstrap, app), args.streams)
            config = ProducerConfig(cluster.bootstrap, app, args.streams)
            progress(f"{name}: sending {len(fragments):,} fragments...")
            seconds = run(config, fragments)
            results.append({"producer": name, "fragments": len(fragments), "seconds": seconds,
                            "fragments_per_s": len(fragments) / seconds})  # fmt: skip
    ceiling = results[0]["fragments_per_s"]
    for row in results:
        row["ratio_to_bare"] = row["fragments_per_s"] / ceiling
    print_table(results, ["producer", "fragments", "seconds", "fragments_per_s", "ratio_to_bare"])
    path = write_json("producer_throughput", {"streams": args.streams, "results": results})
    progress(f"results written to {path}")


if __name__ == "__main__":
    main()
