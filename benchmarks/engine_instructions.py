"""Instructions per fragment of the compiled engine, counted by valgrind, against other checkouts.

    .venv/bin/python -m benchmarks.engine_instructions [--fragments 5000]
        [--processor web|noop] [--stage engine|task|sink|producer|encoding]
        [--against DIR ...]

Wall and CPU times on a shared 2-core machine move by up to 40 % between runs of the
same code (benchmarks/HOT_PATH.md, round 8), more than most changes to the engine.
Instruction counts do not: each tree (this one, then every `--against` checkout with
its own `build/compiled`, e.g. a `git worktree` of an older commit) runs
`benchmarks.engine_throughput`'s apache plan once through `SessionEngine.process`
under `valgrind --tool=callgrind`, counting only inside the compiled `process`
(`--toggle-collect`), so start-up, parsing and imports do not count, and with
Python's collector off (when it runs depends on everything allocated before, not on
the engine: two scripts over the same tree counted 48,363 and 51,054 with it on) the
same tree counts the same to the instruction.  `web` is `WebSessions` (the user's hooks
included), `noop` hooks that do nothing (the engine alone).

`--stage sink` counts `sessionizer.sinks.encode_session` instead, over the finished
sessions of the same pass (the engine's pass is not counted): the encoding is called
through `map`, and only inside `map_next` is counted (the map's own share, a few
instructions a session, is the same in every tree).  It prints instructions per
fragment and per session.

`--stage task` counts `framework.node.task.StreamTask.handle` over the same plan as wire
records (`benchmarks.engine_throughput._wire`): what a node does per record after the
fetch (decode, engine, the outputs' bookkeeping), with the task's own frames.

`--stage producer` counts `StreamProducer.send` over the apache workload's fragments
(`benchmarks.workload`, as `producer_workloads` sends them; 64 streams, confluent-kafka
with librdkafka's `produce` a no-op, so the client's own work is not counted), and
`--stage encoding` the same fragments through `producer_workloads`' bare + encoding
loop, one fragment a call: what the producer adds is the difference.

Needs valgrind and a usable compiled build in every tree (`deploy/build_compiled.py`);
a tree without one is refused, not counted on the Python path.  Each tree runs its
own code: `cwd` and `PYTHONPATH` are the tree, the interpreter is this one's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.common import print_table, progress, tree_commit, write_json

__all__ = ["child_command", "child_env", "count", "main"]

ROOT = Path(__file__).resolve().parents[1]
SYMBOL = "CPyPy_engine___SessionEngine___process"
"""The compiled `SessionEngine.process` as Python calls it: what is counted."""
SYMBOLS = {
    "engine": SYMBOL,
    "sink": "map_next",
    "producer": "filter_next",
    "encoding": "filter_next",
    "task": "filter_next",
}
"""What each stage counts inside (`sink`: the `map` that calls `encode_session`; the
producer stages and `task`: the `filter` that sends or handles each fragment)."""


# Runs in the tree under test, as `python -c`: an older checkout has no module of this.
_CHILD = """
import gc
import sys
from benchmarks import engine_throughput as plans
from benchmarks.engine_memory import current_engines
from framework.kernel import compiled
from sessionizer.examples import WebSessions

fragments, processor = int(sys.argv[1]), sys.argv[2]
stage = sys.argv[3] if len(sys.argv) > 3 else "engine"
choice = compiled.choice()
if choice.path != "compiled":
    sys.exit(f"no usable compiled build ({choice.reason})")
if stage in ("producer", "encoding"):
    import framework.kafka.confluent as client
    from benchmarks.workload import load
    from router.hashing import stream_for_key
    from router.naming import stream_name
    from router.producer import ProducerConfig, StreamProducer
    from router.wire import encode_fragment

    class NoBroker:  # librdkafka's producer, minus the broker: `produce` does nothing
        def __init__(self, *args, **kwargs): pass
        def produce(self, *args, **kwargs): return None
        def flush(self, *args): return 0
        def poll(self, *args): return 0
        def purge(self, *args): pass

    client.Producer = NoBroker
    parsed = load("apache", fragments).fragments
    config = ProducerConfig("127.0.0.1:1", "bench", 64, kafka_client="confluent")
    producer = StreamProducer(config, verify=False)
    topics = [stream_name(config.app, i) for i in range(config.num_streams)]
    produce, routes = NoBroker().produce, {}

    def encoding(f):  # benchmarks.producer_workloads' bare + encoding, one fragment
        topic = routes.get(f.key)
        if topic is None:
            topic = routes[f.key] = topics[stream_for_key(f.key, config.num_streams)]
        key, value = encode_fragment(f)
        produce(topic, value, key, 0, timestamp=f.timestamp_ms)

    step = producer.send if stage == "producer" else encoding
    gc.collect()
    gc.disable()
    list(filter(step, parsed))  # `send` returns None: nothing is kept
    if stage == "producer":
        producer.flush()
        print(f"sent={producer.stats.sent} watermarks={producer.stats.watermarks}")
    sys.exit(0)
engines = current_engines()
records = plans._records(plans._plan(plans._parsed()[1], fragments), engines)
make = WebSessions if processor == "web" else plans.NoOpSessions
if stage == "task":
    from framework.node.task import StreamTask
    from state.record import StreamState

    wire = plans._wire(plans._plan(plans._parsed()[1], fragments))
    handle = StreamTask.resume(make(), StreamState.initial(plans.STREAM)).handle
    gc.collect()
    gc.disable()
    list(filter(handle, wire))  # what a record produced is kept only while it is counted
    sys.exit(0)
if stage == "sink":
    from sessionizer.sinks import encode_session

    engine = engines.engine(plans.STREAM, make())
    made = [out for record in records for out in engine.process(record)]
    sessions = [out for out in made if isinstance(out, engines.session)]
    print(f"sessions={len(sessions)}")
gc.collect()
gc.disable()  # when the collector runs depends on the heap's history, not on the engine
if stage == "sink":
    list(map(encode_session, sessions))
else:
    plans._run(engines, records, make, "engine")
"""


def child_command(fragments: int, processor: str, stage: str = "engine") -> list[str]:
    """The counted run: one pass of the plan, in the tree it is started in."""
    return [sys.executable, "-c", _CHILD, str(fragments), processor, stage]


def child_env(tree: Path) -> dict[str, str]:
    """The counted run's environment: the tree's own code, on its compiled build."""
    return {
        **os.environ,
        "PYTHONPATH": str(tree),
        "PYTHONHASHSEED": "0",
        "SESSIONIZER_HOT_PATH": "compiled",
    }


def count(tree: Path, fragments: int, processor: str, stage: str = "engine") -> tuple[int, int]:
    """(instructions inside the stage for one pass over `fragments`, sessions encoded)."""
    with tempfile.TemporaryDirectory(prefix="engine-instructions-") as scratch:
        out = Path(scratch) / "callgrind.out"
        command = [
            "valgrind",
            "--tool=callgrind",
            "--collect-atstart=no",
            f"--toggle-collect={SYMBOLS[stage]}",
            f"--callgrind-out-file={out}",
            *child_command(fragments, processor, stage),
        ]
        run = subprocess.run(
            command, cwd=tree, env=child_env(tree), capture_output=True, text=True, check=False
        )
        if run.returncode != 0:
            tail = "\n".join(run.stderr.strip().splitlines()[-5:])
            raise SystemExit(f"{tree}: the counted run failed ({run.returncode}):\n{tail}")
        sessions = [int(line[9:]) for line in run.stdout.splitlines() if line[:9] == "sessions="]
        for line in out.read_text().splitlines():
            if line.startswith("totals:"):
                return int(line.split()[1]), sessions[0] if sessions else 0
    raise SystemExit(f"{tree}: callgrind wrote no totals")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Count every tree, print the table, write engine_instructions.json."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--fragments", type=int, default=5_000)
    parser.add_argument("--processor", choices=["web", "noop"], default="web")
    parser.add_argument("--stage", choices=sorted(SYMBOLS), default="engine")
    parser.add_argument("--against", nargs="*", default=[], help="other checkouts to count")
    args = parser.parse_args(argv)
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    rows = []
    trees = [ROOT, *(Path(tree).resolve() for tree in args.against)]
    for tree in trees:
        progress(
            f"counting {tree} ({args.fragments:,} fragments, {args.processor}, {args.stage})..."
        )
        total, sessions = count(tree, args.fragments, args.processor, args.stage)
        rows.append(
            {
                "tree": str(tree),
                "commit": tree_commit(tree),
                "processor": args.processor,
                "stage": args.stage,
                "instructions_per_fragment": total // args.fragments,
                "instructions_per_session": total // sessions if sessions else None,
            }
        )
    for row in rows:
        row["vs_this_tree"] = (
            row["instructions_per_fragment"] / rows[0]["instructions_per_fragment"]
        )
    columns = ["tree", "commit", "processor", "stage", "instructions_per_fragment"]
    columns += (
        ["instructions_per_session", "vs_this_tree"] if args.stage == "sink" else ["vs_this_tree"]
    )
    print_table(rows, columns)
    payload = {"fragments": args.fragments, "rows": rows}
    progress(f"results written to {write_json('engine_instructions', payload)}")
    return payload


if __name__ == "__main__":
    main()
