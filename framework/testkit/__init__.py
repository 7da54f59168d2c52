"""Test your `StreamProcessor` in-process: no servers, no Kafka.

The kit encodes your input as a producer would, routes it to streams by the hash
contract, runs each stream through the node's own `StreamTask` (decode, session
engine, dead letters) and a `MemorySink`, and gives back what a node would have
written. `run_with_crashes` also kills the stream's owner after chosen offsets and
resumes a new one from the last stored state; `assert_exact` checks that this
changes nothing, `assert_batch` compares with the batch definition.
`framework.testkit.engine_runs` drives the session engine itself, record by record
(offsets, commits and crashes you choose), for tests of the engine, and
`framework.testkit.memory` runs a real `Node` over in-memory parts (log, sink, store,
coordinator). The kit imports no pytest: it works under any test runner.

>>> from framework import StreamProcessor
>>> from framework.testkit import assert_batch, assert_exact, frag
>>> class Clicks(StreamProcessor):
...     timeout = 60  # seconds of event time
...     def open(self, key, fragment):
...         return {"clicks": 0}
...     def update(self, session, fragment):
...         session["clicks"] += 1
...     def close(self, key, session):
...         return session
>>> clicks = [frag("ann", 0), frag("bob", 10_000), frag("ann", 30_000), frag("ann", 200_000)]
>>> result = assert_exact(Clicks(), clicks)  # also crashes after every offset
>>> [(s.key, s.result["clicks"]) for s in result.sessions]
[('ann', 2), ('bob', 1), ('ann', 1)]
>>> len(assert_batch(Clicks(), clicks).sessions)
3
"""

from __future__ import annotations

from framework.testkit.checks import assert_batch, assert_exact
from framework.testkit.inputs import APP, EndOfInput, Input, Time, end, frag, watermark
from framework.testkit.runs import ProcessorSource, RunResult, run, run_with_crashes

__all__ = [
    "APP",
    "EndOfInput",
    "Input",
    "ProcessorSource",
    "RunResult",
    "Time",
    "assert_batch",
    "assert_exact",
    "end",
    "frag",
    "run",
    "run_with_crashes",
    "watermark",
]
