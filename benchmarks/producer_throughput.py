"""`StreamProducer` against the bare producer of each Kafka client, on generated traffic.

    .venv/bin/python -m benchmarks.producer_throughput [--fragments 200000] [--streams 16]

The quick form of `benchmarks.producer_workloads` (which see for the method and
the columns): the generated workload only, both clients side by side in one run,
16 streams by default.
"""

from __future__ import annotations

import argparse

from benchmarks import producer_workloads

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    """Run both clients' bare producer and `StreamProducer`; print them side by side."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fragments", type=int, default=producer_workloads.DEFAULT_FRAGMENTS)
    parser.add_argument("--streams", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args(argv)
    producer_workloads.main(
        ["--workload", "generated", "--fragments", str(args.fragments),
         "--streams", str(args.streams), "--repeat", str(args.repeat)]
    )  # fmt: skip


if __name__ == "__main__":
    main()
