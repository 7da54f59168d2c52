"""The prose of RESULTS.md: what each scenario measured (NOTES) and how to read it (READING)."""

from __future__ import annotations

__all__ = ["NOTES", "READING"]

NOTES = {
    "producer_workloads": (
        "For each workload and each Kafka client, three producers send the same fragments, "
        "built before timing, with the same settings (acks=all, idempotence, lz4, linger 20 "
        "ms, 256 KiB batches; on confluent-kafka librdkafka may queue 1,000,000 records, "
        "`StreamProducer`'s default, so that a short pause of the broker does not stop the "
        "producers: benchmarks/HOT_PATH.md, round 22) to a fresh app's stream topics: the bare "
        "producer of that client "
        "(stream, encoded key and value precomputed), bare + encoding (routing and encoding as "
        "it sends), and `StreamProducer`.  Timed from the first send to the last "
        "acknowledgement of the final flush; `CPU ratio`: the bare producer's CPU per fragment "
        "over this one's.  Before each run the fragments held in memory (and the bare "
        "producer's prepared records) are frozen out of the cyclic collector's reach "
        "(`gc.freeze`), for all three alike: a real producer does not hold its whole input, "
        "and left in, a million objects walked by every full collection were charged to "
        "whichever producer allocated most (benchmarks/HOT_PATH.md, round 16)."
    ),
    "nodes_vs_bare": (
        "Each workload is produced once.  On the same topics, for each Kafka client and each "
        "N: N bare readers of that client (one process each, every N-th stream, fetch and "
        "record decoding only: the ceiling for this client), then N `sessionizer node "
        "--kafka-client CLIENT` processes (WebSessions, otherwise default flags: commit every "
        "1 s, at-least-once) from a fresh state, then N bare relays (bare readers that also "
        "write the nodes' sessions again, pre-encoded, with the node's output producer "
        "settings: a node's own Kafka I/O with a free engine; `relay/bare` is the most "
        "`ratio nodes/bare` can be for this client, `nodes/relay` what the engine, state and "
        "commits cost on top of it).  `fragments per node CPU s`: fragments/s per "
        "core the nodes kept busy (start-up included).  Node time runs from the "
        "first stream resumed to ZooKeeper showing every stream's committed position at its "
        "end offset (so it includes up to one commit interval).  Every session written is "
        "checked against the batch definition (`exact`).  A row of repeated runs gives the "
        "median of each rate and the ratios of those medians (the rest from the nodes' "
        "median run); its runs are listed below the table."
    ),
    "peers": (
        "Every system reads the same stream topics from offset 0, one after the other, each "
        "in its own process: same key (`ip|agent`, the record key), same 30-minute gap, 2 "
        "minutes allowed for late records, watermark records skipped, each session written "
        "as one JSON record to a Kafka topic, state snapshot/commit interval 1 s (our nodes "
        "commit every 1 s).  Bytewax: one worker, `KafkaSource(tail=False)` -> `fold_window` "
        "with `EventClock` and `SessionWindower` -> `KafkaSink`, recovery on (SQLite).  Quix "
        "Streams 3.28 has a native `session_window` (the hand-written `State` function is no "
        "longer needed): one `StreamingDataFrame` per topic, `Count`/`Sum` aggregations, "
        '`final(closing_strategy="partition")`, changelog topics on.  Spark: the Kafka '
        "source, a Python UDF decoding the msgpack value, `withWatermark` 2 minutes, "
        "`session_window` 30 minutes, append mode to Kafka, `availableNow` trigger, "
        "`local[*]` (both cores), 4 shuffle partitions.  Kafka Streams (the project's Kafka "
        "version) and Flink 2 are Java programs in `benchmarks/jvm/`, built from source with "
        "Maven (`python -m benchmarks.peer_jvm`, run by `make bench`; versions pinned in its "
        "pom): Kafka Streams `groupByKey().windowedBy(SessionWindows.ofInactivityGapAndGrace("
        "30 min, 2 min))`, `aggregate` into the default RocksDB session store, "
        "`suppress(untilWindowCloses)`, one stream thread, commit interval 1 s, at-least-once "
        "(`kstreams`) or `exactly_once_v2` (`kstreams-eos`); Flink, a DataStream job on a "
        "local MiniCluster, parallelism 1: bounded `KafkaSource`, 2-minute bounded "
        "out-of-orderness, `EventTimeSessionWindows.withGap(30 min)`, incremental `aggregate`, "
        "at-least-once `KafkaSink`, checkpoints every 1 s to a local directory (hashmap state "
        "backend).  Both skip watermark records and write the same JSON session fields.  "
        "Kafka Streams has no end of input: before it starts, its driver writes one sentinel "
        "record (key `~end-of-input~`) to a topic of its own read with the stream topics, "
        "timestamped the latest record time of the stream topics + gap + grace + 1 s; "
        "records already on the broker are processed in timestamp order, so it comes last and "
        "closes every session (the stream topics themselves are left as they were).  Flink's "
        "bounded source ends by itself.  Time: ours, first stream resumed to "
        "the end committed; Bytewax, first record to the end of the run; Quix, first to last "
        "message processed; Spark, the sum of its micro-batches; Kafka Streams and Flink, the "
        "first record consumed to the last session handed to the sink.  `CPU s` is the whole "
        "process (for the JVMs from the kernel when the JVM is reaped, start-up and JIT "
        "included); `CPU s from first record` leaves out what the JVM had used when it "
        "consumed its first record.  State: Kafka Streams, its changelog topics' bytes; "
        "Flink, every checkpoint file written (the directory polled every 0.2 s).  `wall s` "
        "adds start-up (JVM, topic creation, group join).  `open at end`: sessions a system "
        "without an end-of-input signal cannot close; `matches` checks everything else it "
        "wrote."
    ),
    "failover_modes": (
        "Three nodes sessionize the first half of the workload; the second half is produced "
        "while they consume and, a quarter of the way in, node n2 is stopped while busy "
        "(kill -9, SIGTERM, SIGTERM with `--drain`).  In the join rows only n1 and n2 ran the "
        "first half, and n3 joins just before the second.  Every planned move runs with "
        "`--handover on` on every node (the giver hands each open engine over, the next "
        "owner reads from the committed offset) and with `--handover off` (the next owner "
        "replays from the safe offset, as after a crash, which kill -9 always does).  Times "
        "run from the signal (join: from n3's `node_started`) to the moved streams' "
        "`stream_resumed` on their new owners (state loaded, handover used or not), and to "
        "every stream committed at its end offset (`caught up`).  `records replayed`: the "
        "sum of `replay` over the moved streams' `stream_resumed` events; `resumed from a "
        "handover`: moved streams that had open sessions and got them handed over (a stream "
        "with nothing open needs none)."
    ),
    "skew": (
        "16 streams, 4 of them carrying about 70% of the fragments (the workload's keys "
        "filtered by the routing hash), written at a steady rate while n1 runs alone until "
        "every stream has a published load, then n2 joins, then n3; each phase ends when the "
        "group has been steady for one balance interval (`load`: every node within the "
        "tolerance of the mean).  Run once with every node on `--balance count` and once "
        "on `--balance load`.  `node loads`: each node's streams' published fragments/s "
        "(`status --json` `node_loads`), averaged over the steady stretch; `streams moved`: "
        "streams released from the join to the end of the phase; `settled s`: from the "
        "joiner's `node_started` to the start of the steady stretch.  Under `count` the "
        "imbalance depends on which streams the joiner happens to take: one run can be "
        "lucky, the load policy does not depend on luck.  The sessions written are checked "
        "against the batch definition of what was sent (`exact`)."
    ),
    "scaling": (
        "Per stream count the workload is produced once, then sessionized by 1..4 nodes in "
        "turn from a fresh state.  `node CPU s per 1M`: the nodes' own CPU time per million "
        "fragments; `cores busy`: the whole machine (Kafka, ZooKeeper and the benchmark "
        "included); `state writes`/`state KiB/s`: ZooKeeper `stream_state` writes; `converge "
        "s`: from spawning the nodes to every stream claimed with a spread <= 1."
    ),
    "broker_ceiling": (
        "Kafka's own perf-test tools (`java -cp` the resolved Kafka jars plus kafka-tools, "
        "see deploy/local/pom.xml), on the run's broker: no Python in the path.  The physical "
        "limit the nodes and bare readers are measured against."
    ),
    "engine_memory": (
        "`tracemalloc`: the Python heap an engine keeps after long visits (every visitor one "
        "request every 30 s for the whole visit, all sessions still open), divided by the open "
        "sessions; every record decoded from msgpack bytes as a node does."
    ),
    "profile_node": (
        "py-spy (`record --format raw --threads --nonblocking`) on one node for its whole "
        "life while it sessionizes the apache workload on 64 streams; each sample goes to the "
        "category of its innermost frame a rule knows (`benchmarks/profile_node.py`).  `loop "
        "thread`: the node's main thread, in % of the recording's wall time (the rest idle: "
        "waiting in a poll or for the GIL, or not yet started); `% of loop's CPU`: of its "
        "samples once started (imports left out); `other threads`: the clients' I/O "
        "threads, kazoo's and the metrics server's, in % of one core.  librdkafka's native "
        "threads are not sampled."
    ),
    "zookeeper_commits": (
        "One node's real state store (`FencedStateStore` over `ZooKeeperRecords`) against "
        "the run's ZooKeeper, with realistic records; rounds as a node commits them at 16, 64, "
        "288 and 1,024 streams.  `unchanged`: a stream that did not move is not written (the "
        "node skips it), so that row is 0 by construction, not timed.  `load publish`: one "
        "round of the node's published stream loads, every load changed.  `claims`: the node "
        "taking every stream (start-up, failover) and releasing it again: one `take` after "
        "another, or `take_each` with every read, then every claim transaction, in flight "
        "at once (`balancer.claims`)."
    ),
    "delivery_modes": (
        "One node per run, `--delivery at-least-once` then `--delivery exactly-once` at each "
        "commit interval, on the same produced topics from a fresh state.  Throughput as in "
        "scenario 2 (it includes up to one commit interval, so at small sizes the 5 s rows "
        "say little); state bytes per million fragments: ZooKeeper's `stream_state` writes "
        "(at-least-once's state, exactly-once's hint) and the key and value bytes written to "
        "`<app>.state` (exactly-once's state, in the transactions); latency: from a "
        "session's last fragment acknowledged to the session read by a `read_committed` "
        "consumer, with traffic at a steady rate on a fresh app (docs/delivery.md)."
    ),
    "resize": (
        "The real Apache log (replicated beyond its 10,000 lines) from one named producer at "
        "a steady rate to 8 streams and 2 nodes; after a third of it `sessionizer streams "
        "resize --count 12` (a subprocess) and a third node.  Times from the command's start: "
        "until every new stream's committed offset moved, and until `status` shows every "
        "stream migrated or settled.  Records/s: the committed offsets' growth, before the "
        "resize while the producer runs, after it from every new stream consuming until all "
        "is committed (docs/resize.md)."
    ),
    "session_memory": (
        "`SessionEngine` with `WebSessions` and grace 0 (no fragment held raw, no session "
        "ended), every record decoded from msgpack bytes as a node does; each figure from a "
        "fresh process per hot path (`SESSIONIZER_HOT_PATH`): `tracemalloc`'s traced heap, "
        "and the resident set, after minus before, per open session.  `loaded`: the path the "
        "process really ran (benchmarks/HOT_PATH.md)."
    ),
    "produce_command": (
        "The real apache log, written as many times as `--copies` into one file; "
        "`sessionizer produce FILE --format apache --kafka-client CLIENT` in a process of its "
        "own, to a fresh app's 64 streams, timed from its start to its exit (start-up "
        "included), its CPU from the child's rusage.  Beside it, in the benchmark's process on "
        "the same file: reading the lines alone (`read_lines`), and reading and parsing them "
        "(`parse_apache`), what the command costs before it sends anything.  Each row is the "
        "median of its runs (benchmarks/HOT_PATH.md, round 20)."
    ),
}


READING = """## Reading these numbers

- Two cores run everything: Kafka, ZooKeeper, the benchmark process, and the system under
  test.  A node, a bare reader, Bytewax (one worker) and Quix are single Python processes,
  so each can use at most one core; Spark's `local[*]` uses both.  Where `cores busy` is
  close to 2, adding nodes cannot add throughput on this machine: that is the machine's
  limit, not the design's.  The node's CPU seconds per million fragments are the portable
  figure.
- Our state is the thesis's: per stream a safe offset and an ignore list, a record of about
  100 bytes, written every commit interval whether or not the stream moved, so its rate
  grows with the number of streams and not with traffic.  ZooKeeper fsyncs every write: the
  `local disk written` of our rows is the ZooKeeper server's own disk writes (4 KiB pages),
  when the run started the servers itself.
- Peers keep the open sessions themselves in their state and persist them: Bytewax
  snapshots, at every epoch, the window state of every key that changed into SQLite, Quix
  writes every window update to a changelog topic and to RocksDB, Spark writes state-store
  deltas per micro-batch.
- Bytewax's `EventClock` keeps one watermark per key, moved by that key's own records and
  by wall-clock time.  On replayed history a session closes early only if its key sends a
  record more than 32 minutes (event time) later; every other session stays open until the
  end of input, so Bytewax's live state, and the close at the end, grow with the input,
  and its fragments/s fall as the input grows (`python -m benchmarks.peers --peers bytewax
  --fragments N` at two sizes shows it).  Because wall time moves that watermark too, a
  record read long (in wall time) after its key's latest one can fall behind it: Bytewax
  sets it aside as late (`late_records` in `benchmarks/out/peers.json`) and writes the
  session without it.  How many depends on the run's timing, not on the input, so a slow
  run can differ from the batch definition where a fast one matches.
- A number is only printed if it was measured in this run; a peer that failed shows its
  error instead.
"""
