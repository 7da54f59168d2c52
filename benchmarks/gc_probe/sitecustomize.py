"""A probe of Python's cyclic collector in the nodes a benchmark starts (not imported by code).

    PYTHONPATH=benchmarks/gc_probe SESSIONIZER_GC_PROBE_OUT=/tmp/gc \\
        .venv/bin/python -m benchmarks.nodes_vs_bare --workload apache --nodes 1 ...

Python imports `sitecustomize` at start-up from its path, and the benchmarks pass
PYTHONPATH on to the nodes they spawn. In a `sessionizer node` process this counts
every collection by generation through `gc.callbacks`, with the CPU seconds it took and
the longest, and at exit writes one line to `$SESSIONIZER_GC_PROBE_OUT.<pid>`: the
thresholds, the process's CPU seconds, the collector's (start-up's collections
included). `SESSIONIZER_GC_PROBE_THRESHOLDS=a,b,c` makes the node's
`gc.set_threshold` call set those instead (an experiment on the threshold without a
build of the node's config). Any other process is left alone.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import time
from typing import Any

_OUT = os.environ.get("SESSIONIZER_GC_PROBE_OUT")


def _install(out: str) -> None:
    seconds, counts, longest, began = [0.0] * 3, [0] * 3, [0.0] * 3, [0.0]

    def timed(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            began[0] = time.process_time()
            return
        generation, spent = info["generation"], time.process_time() - began[0]
        seconds[generation] += spent
        counts[generation] += 1
        longest[generation] = max(longest[generation], spent)

    def report() -> None:
        with open(f"{out}.{os.getpid()}", "w") as file:
            file.write(
                f"thresholds {gc.get_threshold()} cpu_s {time.process_time():.2f} "
                f"gc_s {sum(seconds):.3f} by_generation {[round(s, 3) for s in seconds]} "
                f"collections {counts} longest_ms {[round(s * 1000, 1) for s in longest]}\n"
            )

    gc.callbacks.append(timed)
    atexit.register(report)
    forced = os.environ.get("SESSIONIZER_GC_PROBE_THRESHOLDS")
    if forced:
        values = [int(value) for value in forced.split(",")]
        set_threshold = gc.set_threshold
        gc.set_threshold = lambda *_: set_threshold(*values)


if _OUT and "node" in sys.argv[1:2]:
    _install(_OUT)
