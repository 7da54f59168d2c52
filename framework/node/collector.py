"""How the processes of a node and of a producer run Python's cyclic garbage collector.

A node's loop allocates container objects for every record (the fragment's fields,
its member of a session, a finished session), nearly all of them freed by reference
counting. With Python's default threshold (a scan of the young generation every 700
allocations), the collector still scanned the young objects some 5,400 times and the
whole heap, start-up's modules, classes and functions included, 44 times per million
fragments of the apache workload: 2.6 s of a 27 s run, a tenth of the loop
(benchmarks/HOT_PATH.md, round 8). So once it has started, a node freezes what start-up
made (`gc.freeze`: those objects are never scanned again) and scans the young
generation every `NodeConfig.gc_threshold` allocations: 0.45 s in the same run at
10,000. A scan's cost is mostly the young objects alive at that moment (a polled
batch's records, the open sessions' new state), not the threshold, so fewer scans cost
less: at 100,000, the default, the collector took 0.31 s of a 1,000,000-fragment run
against 0.94 s at 10,000 (benchmarks/HOT_PATH.md, round 13), its longest scan some tens
of milliseconds. Cyclic garbage, which the engine does not make (a hook's exception and
its traceback do), is collected later, not never.

`sessionizer produce` and `generate` run the same policy: over kafka-python a producer
keeps every record in flight as a future, its callbacks and its batch, and the collector
walked them some 2,700 times per 300,000 lines, about an eighth of the command's time
(benchmarks/HOT_PATH.md, round 20).
"""

from __future__ import annotations

import gc
from typing import Final

__all__ = ["COLLECTOR_THRESHOLD", "tune_collector"]

COLLECTOR_THRESHOLD: Final = 100_000
"""Allocations between two scans of the young generation in a node's and a producer's
process (Python's default is 700)."""


def tune_collector(threshold: int | None) -> None:
    """Freeze start-up's objects and scan the young generation every `threshold` allocations.

    None leaves Python's collector as it is.
    """
    if threshold is None:
        return
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(threshold, middle, old)
