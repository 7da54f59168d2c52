"""Measuring instruments the scenario benchmarks share.

- `bench_cluster()`: the servers of a run (one shared cluster when `run_all` runs
  every scenario), with the server pids when this process started them, so that
  what ZooKeeper itself writes to disk can be read from /proc;
- `StateWatch`: polls every stream's `stream_state` znode from its own ZooKeeper
  session: when the app has caught up (every committed read position at the end
  offset), when the group was balanced, and how many state writes and bytes the
  nodes made (each znode's version counts its writes, each write is sized by the
  znode's size when it was seen);
- CPU and disk accounting from /proc (the machine has 2 cores: the numbers say
  when the machine, not the design, is the limit);
- Kafka-side sizes (`topic_bytes`) and a reader for JSON sessions written to a topic.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError

from benchmarks.common import progress, write_json
from framework.cluster import LocalCluster
from framework.kernel.config import ConnectionConfig
from framework.kernel.zookeeper import zookeeper_client
from framework.logging import configure_logging
from framework.provision import provision_streams
from framework.testing.members import balanced
from state.record import StreamState

__all__ = [
    "CLK_TCK",
    "BenchCluster",
    "CpuSampler",
    "CpuTimes",
    "StateWatch",
    "active_cluster",
    "bench_cluster",
    "cpu_seconds",
    "create_topic",
    "delete_app",
    "dir_bytes",
    "end_offset",
    "list_topics",
    "load_average",
    "process_io",
    "read_json_topic",
    "remove_tree",
    "reset_app",
    "save_scenario",
    "stat_fields",
    "topic_bytes",
    "tree_cpu",
    "tree_io",
]

CLK_TCK = os.sysconf("SC_CLK_TCK")
"""Clock ticks a second: the unit of /proc's CPU times."""


@dataclass(frozen=True)
class BenchCluster:
    """Connection strings, and the server pids when this process started the servers."""

    zk: str
    bootstrap: str
    zk_pid: int | None = None
    kafka_pid: int | None = None
    origin: str = "SESSIONIZER_ZK/SESSIONIZER_BOOTSTRAP"


_ACTIVE: list[BenchCluster] = []


def active_cluster() -> BenchCluster | None:
    """The cluster of an enclosing `bench_cluster()` (run_all's), if any."""
    return _ACTIVE[-1] if _ACTIVE else None


@contextmanager
def bench_cluster() -> Iterator[BenchCluster]:
    """The cluster already opened by an enclosing call (run_all), the environment's, or a new one.

    A new one is a one-server ZooKeeper + one-broker Kafka `LocalCluster` in a
    temporary directory, stopped again on exit, also on failure.
    """
    if _ACTIVE:
        yield _ACTIVE[-1]
        return
    # Tables go to stdout, progress lines to stderr; the framework's info logs would drown them,
    # and so would kafka-python's warnings about its own I/O thread on a busy machine.
    configure_logging("warning")
    logging.getLogger("kafka").setLevel(logging.ERROR)
    zk, bootstrap = os.environ.get("SESSIONIZER_ZK"), os.environ.get("SESSIONIZER_BOOTSTRAP")
    if zk and bootstrap:
        cluster = BenchCluster(zk, bootstrap)
        _ACTIVE.append(cluster)
        try:
            yield cluster
        finally:
            _ACTIVE.pop()
        return
    progress("starting a local ZooKeeper + Kafka for this run...")
    with (
        tempfile.TemporaryDirectory(prefix="sessionizer-bench-") as directory,
        LocalCluster(directory, brokers=1) as local,
    ):
        cluster = BenchCluster(
            local.zk_connect,
            local.bootstrap,
            zk_pid=local.process("zk1").pid,
            kafka_pid=local.process("kafka1").pid,
            origin="LocalCluster (1 ZooKeeper, 1 Kafka broker) started for this run",
        )
        _ACTIVE.append(cluster)
        try:
            yield cluster
        finally:
            _ACTIVE.pop()
            progress("stopping the local ZooKeeper + Kafka...")


# -- /proc accounting -------------------------------------------------------------------


@dataclass(frozen=True)
class CpuTimes:
    """The machine's CPU time so far (all cores), in seconds: busy and total."""

    busy: float
    total: float

    @classmethod
    def now(cls) -> CpuTimes:
        """Read /proc/stat."""
        with open("/proc/stat") as stat:
            values = [int(v) for v in stat.readline().split()[1:]]
        idle = values[3] + values[4]  # idle + iowait
        total = sum(values[:8])  # without guest time, which is counted in user already
        return cls((total - idle) / CLK_TCK, total / CLK_TCK)

    def cores_busy(self, later: CpuTimes, wall_seconds: float) -> float:
        """How many cores were busy on average between `self` and `later` (any process)."""
        return (later.busy - self.busy) / wall_seconds if wall_seconds > 0 else 0.0


class CpuSampler:
    """Samples the machine's CPU time every `interval` seconds in a thread (a context manager).

    `cores_busy(start, end)` is the average number of busy cores between two wall
    times inside the sampled span, from the samples nearest to them.
    """

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.samples: list[tuple[float, CpuTimes]] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)

    def __enter__(self) -> CpuSampler:
        self.samples.append((time.time(), CpuTimes.now()))
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()
        self._thread.join(timeout=10)
        self.samples.append((time.time(), CpuTimes.now()))

    def _run(self) -> None:
        while not self._done.wait(self.interval):
            self.samples.append((time.time(), CpuTimes.now()))

    def _nearest(self, at: float) -> tuple[float, CpuTimes]:
        return min(self.samples, key=lambda sample: abs(sample[0] - at))

    def cores_busy(self, start: float, end: float) -> float | None:
        """Average busy cores (any process) between `start` and `end`; None if not sampled."""
        (t0, c0), (t1, c1) = self._nearest(start), self._nearest(end)
        return c0.cores_busy(c1, t1 - t0) if t1 > t0 else None


def stat_fields(path: str) -> list[str]:
    """The fields of a /proc `stat` file after the command's name (the state first: field 3
    of proc(5) is index 0); raises OSError when the process or thread is gone."""
    with open(path) as stat:
        return stat.read().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of one live process (0.0 when it is gone)."""
    try:
        fields = stat_fields(f"/proc/{pid}/stat")
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def tree_cpu(pid: int) -> float:
    """CPU seconds of a live process and its live descendants."""
    total, pending = 0.0, [pid]
    while pending:
        current = pending.pop()
        total += cpu_seconds(current)
        pending.extend(_children(current))
    return total


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            parent = int(stat_fields(f"/proc/{entry}/stat")[1])
        except (OSError, ValueError, IndexError):
            continue
        if parent == pid:
            found.append(int(entry))
    return found


def process_io(pid: int) -> dict[str, int]:
    """/proc/<pid>/io as integers (empty when the process is gone or it is not readable)."""
    try:
        with open(f"/proc/{pid}/io") as io:
            return {k: int(v) for k, v in (line.split(":") for line in io)}
    except OSError:
        return {}


def tree_io(pid: int) -> int:
    """Bytes a process and its descendants sent to the storage layer (`write_bytes`)."""
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        io = process_io(current)
        total += io.get("write_bytes", 0) - io.get("cancelled_write_bytes", 0)
        pending.extend(_children(current))
    return total


def load_average() -> float:
    """The 1-minute load average (other work on the machine skews every number)."""
    return os.getloadavg()[0]


def save_scenario(
    name: str,
    params: Any,
    workloads: list[dict[str, Any]],
    load_before: float,
    rows: list[dict[str, Any]],
    **extra: Any,
) -> dict[str, Any]:
    """A scenario's payload, written to benchmarks/out/<name>.json (what report.py reads)."""
    payload = {
        "benchmark": name,
        "params": vars(params),
        "workloads": workloads,
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "results": rows,
        **extra,
    }
    progress(f"results written to {write_json(name, payload)}")
    return payload


def dir_bytes(path: Path) -> int:
    """Total size of the files under `path` (0 if it does not exist)."""
    if not path.exists():
        return 0
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# -- Kafka ------------------------------------------------------------------------------


def topic_bytes(bootstrap: str, topics: Iterable[str]) -> int:
    """Bytes the broker holds for these topics' partitions (all replicas), per DescribeLogDirs."""
    wanted = set(topics)
    if not wanted:
        return 0
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="bench-sizes")
    try:
        answer = admin.describe_log_dirs()
    finally:
        admin.close()
    return sum(_sizes(answer, wanted))


def _sizes(answer: list[dict[str, Any]], wanted: set[str]) -> Iterator[int]:
    # One dict per broker: {"broker", "log_dirs": [{"topics": [{"name", "partitions":
    # [{"partition_size", ...}]}]}]}.
    for broker in answer:
        for log_dir in broker.get("log_dirs", ()):
            for topic in log_dir.get("topics", ()):
                if topic["name"] in wanted:
                    yield from (p["partition_size"] for p in topic["partitions"])


def list_topics(bootstrap: str) -> list[str]:
    """Every topic name in the cluster."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="bench-topics")
    try:
        return list(admin.list_topics())
    finally:
        admin.close()


def create_topic(bootstrap: str, name: str) -> None:
    """A single-partition topic without time retention (sessions carry old event times)."""
    from kafka.admin import NewTopic

    from framework.kafka.admin import admin_client, wait_writable
    from framework.kafka.errors import TopicExists

    admin = admin_client(bootstrap, client_id="bench-admin")
    try:
        with suppress(TopicExists):
            admin.create_topics(
                [NewTopic(name, 1, 1, topic_configs={"retention.ms": "-1"})], timeout_ms=30_000
            )
        wait_writable(admin, [name], 60.0)  # a first send to a log not yet there can be lost
    finally:
        admin.close()


def end_offset(bootstrap: str, topic: str) -> int:
    """The last stable offset of partition 0 of `topic` (0 if the topic does not exist)."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        client_id="bench-ends",
        isolation_level="read_committed",
    )
    try:
        if not consumer.partitions_for_topic(topic):
            return 0
        tp = TopicPartition(topic, 0)
        return int(consumer.end_offsets([tp], timeout_ms=10_000)[tp])
    finally:
        consumer.close()


def read_json_topic(
    bootstrap: str, topic: str, start: int = 0, *, timeout: float = 300.0
) -> list[dict[str, Any]]:
    """Every committed JSON value of partition 0 from `start` to the stable end as of the call.

    `read_committed`: an exactly-once writer's (a node's or a peer's) aborted
    transactions are not output.
    """
    tp = TopicPartition(topic, 0)
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        client_id="bench-read",
        isolation_level="read_committed",
        max_partition_fetch_bytes=8 * 1024 * 1024,
    )
    try:
        consumer.assign([tp])
        end = consumer.end_offsets([tp], timeout_ms=10_000)[tp]
        consumer.seek(tp, start)
        values: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while consumer.position(tp) < end:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic} did not reach offset {end} in {timeout} s")
            for batch in consumer.poll(timeout_ms=500, max_records=10_000).values():
                values.extend(json.loads(r.value) for r in batch if r.offset < end)
        return values
    finally:
        consumer.close()


# -- ZooKeeper --------------------------------------------------------------------------


@dataclass
class _Seen:
    version: int
    size: int


@dataclass
class StateWatch:
    """Polls the app's `stream_state` znodes in a thread until stopped.

    `caught_up_at`: wall time when every stream's committed read position had
    first reached `ends`; `balanced_at`: when the claims were first balanced over
    `members` (if given); `writes`/`bytes_written`: state writes seen (versions)
    and their bytes; `peak_sizes`/`final_sizes`: the largest and the last total
    size of all the streams' records.  Use as a context manager.
    """

    zk: str
    connection: ConnectionConfig
    streams: list[str]
    ends: dict[str, int]
    members: list[str] | None = None
    interval: float = 0.1
    caught_up_at: float | None = None
    balanced_at: float | None = None
    writes: int = 0
    bytes_written: int = 0
    final_sizes: int = 0
    peak_sizes: int = 0
    committed: int = 0
    _seen: dict[str, _Seen] = field(default_factory=dict)
    _done: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _error: BaseException | None = None

    def __enter__(self) -> StateWatch:
        self._thread = threading.Thread(target=self._run, name="state-watch", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=60)

    def _run(self) -> None:
        try:
            with zookeeper_client(self.zk, timeout=30) as client:
                while not self._done.is_set():
                    self._poll(client)
                    self._done.wait(self.interval)
                self._poll(client)  # the last writes (releases on SIGTERM)
        except BaseException as exc:  # surfaced by `check()`; the thread must not die silently
            self._error = exc

    def check(self) -> None:
        """Raise what stopped the watch thread, if anything did."""
        if self._error is not None:
            raise RuntimeError(f"the state watch failed: {self._error!r}") from self._error

    def _poll(self, client: KazooClient) -> None:
        paths = self.connection.paths
        pending = [(s, client.get_async(paths.stream_state(s))) for s in self.streams]
        committed = sizes = 0
        for stream, result in pending:
            try:
                data, stat = result.get()
            except NoNodeError:
                continue
            except KazooException:
                return  # try again at the next poll
            before = self._seen.get(stream)
            writes = stat.version + 1 if before is None else stat.version - before.version
            self.writes += writes
            self.bytes_written += writes * stat.dataLength
            self._seen[stream] = _Seen(stat.version, stat.dataLength)
            sizes += stat.dataLength
            position = StreamState.decode(data, stream=stream).committed_offset
            committed += min(position, self.ends.get(stream, 0))
        self.final_sizes = sizes
        self.peak_sizes = max(self.peak_sizes, sizes)
        self.committed = committed
        now = time.time()
        if self.caught_up_at is None and committed >= sum(self.ends.values()):
            self.caught_up_at = now
        if self.members is not None and self.balanced_at is None:
            try:
                if balanced(client, paths, self.members, len(self.streams)):
                    self.balanced_at = now
            except NoNodeError:
                pass


def reset_app(connection: ConnectionConfig, streams: int) -> None:
    """Forget every node's state of the app (its topics stay): the next run starts from offset 0.

    Only between runs, with no node of the app running.
    """
    with zookeeper_client(connection.zk) as client:
        client.delete(connection.paths.root, recursive=True)
    provision_streams(connection, streams)


def delete_app(connection: ConnectionConfig, extra_topics: Iterable[str] = ()) -> None:
    """Remove the app's topics (and `extra_topics`) and its ZooKeeper subtree; best effort."""
    prefix = f"{connection.app}."
    try:
        names = [t for t in list_topics(connection.bootstrap) if t.startswith(prefix)]
        names += [t for t in extra_topics if t not in names]
        admin = KafkaAdminClient(bootstrap_servers=connection.bootstrap, client_id="bench-admin")
        try:
            if names:
                admin.delete_topics(names, timeout_ms=60_000, raise_errors=False)
        finally:
            admin.close()
        with zookeeper_client(connection.zk) as client:
            client.delete(connection.paths.root, recursive=True)
    except Exception as exc:  # cleanup must never hide the measurement's own outcome
        progress(f"cleanup of {connection.app} incomplete: {exc!r}")


def remove_tree(path: Path) -> None:
    """rm -rf, quietly."""
    shutil.rmtree(path, ignore_errors=True)
