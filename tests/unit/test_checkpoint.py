"""`Checkpoint`: its numbered steps in their order, over one stream, without a loop."""

from __future__ import annotations

from typing import Any

from framework.node.checkpoint import Checkpoint
from framework.node.deliveries import Deliveries
from framework.node.handover import NodeHandover
from framework.node.stats import NodeStats
from framework.node.streams import OwnedStreams
from framework.node.task import StreamTask
from framework.testkit.memory import FlushingSink, MemoryLog, node_config, traffic_log
from router.generator import generate_fragments
from sessionizer.examples.weblog import WebSessions
from sessionizer.records import FinishedSession
from sessionizer.sinks import DeadLetter
from state.errors import StateError
from state.store import FencedStateStore, VersionedMemory


class Quiet:
    """A logger that says nothing."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


class Sink(FlushingSink):
    """Notes each send and flush in a shared list of events."""

    def __init__(self, events: list[str], **faults: Any) -> None:
        super().__init__(**faults)
        self.events = events

    def emit(self, session: FinishedSession) -> None:
        self.events.append("send")
        super().emit(session)

    def dead_letter(self, letter: DeadLetter) -> None:
        self.events.append("send")
        super().dead_letter(letter)

    def flush(self) -> None:
        if self.sessions or self.dead_letters:
            self.events.append("flush")
        super().flush()


class Store(FencedStateStore):
    """Notes each commit in the shared list of events."""

    def __init__(self, memory: VersionedMemory, events: list[str]) -> None:
        super().__init__(memory)
        self.events = events

    def commit_many(self, states: Any) -> dict[str, StateError | None]:
        self.events.append("commit")
        return super().commit_many(states)


class Coordinator:
    """Connected; remembers the streams reported fenced."""

    connected = True

    def __init__(self) -> None:
        self.fenced: list[str] = []

    def report_fenced(self, stream: str) -> None:
        self.fenced.append(stream)


class Setup:
    """One stream of generated traffic, its task, and a checkpoint over fakes."""

    def __init__(self, **config: Any) -> None:
        self.events: list[str] = []
        self.memory = VersionedMemory()
        log = traffic_log(list(generate_fragments(40, seed=3)), 1)
        [(self.stream, self.records)] = log.items()
        self.store = Store(self.memory, self.events)
        state = self.store.load(self.stream, self.memory.take(self.stream))
        self.task = StreamTask.resume(WebSessions(), state)
        self.tasks = {self.stream: self.task}
        self.sink = Sink(self.events, fail_flushes=config.pop("fail_flushes", ()))
        self.stats = NodeStats()
        out = Deliveries(self.sink, node_config(**config), self.stats, Quiet())
        self.coordinator = Coordinator()
        self.checkpoint = Checkpoint(
            out=out,
            store=self.store,
            coordinator=self.coordinator,  # type: ignore[arg-type]
            streams=OwnedStreams(self.tasks, MemoryLog(log), self.stats, out.held),
            handover=NodeHandover(None, "n1", Quiet(), None),
            stats=self.stats,
            log=Quiet(),
            metrics=None,
            interval=1.0,
        )

    def feed(self) -> None:
        """Every record through the task, its output delivered."""
        for record in self.records:
            self.checkpoint.deliver(self.task, self.task.handle(record))


def test_at_least_once_flushes_then_commits() -> None:
    run = Setup()
    run.feed()
    run.checkpoint.commit([run.stream])
    assert "send" in run.events and run.events[-2:] == ["flush", "commit"]
    assert run.events.index("flush") > max(i for i, e in enumerate(run.events) if e == "send")
    assert run.stats.commits == 1 and run.task.committed == run.task.snapshot()


def test_at_most_once_commits_then_sends_what_it_held() -> None:
    run = Setup(delivery="at-most-once", max_unsent=10_000)
    run.feed()
    assert run.events == [] and run.task.unsent
    run.checkpoint.commit([run.stream])
    assert run.events[0] == "commit" and run.events[-1] == "flush"
    assert set(run.events[1:-1]) == {"send"} and run.task.unsent == []


def test_a_failed_flush_commits_nothing_and_rewinds_to_the_last_commit() -> None:
    run = Setup(fail_flushes={1})
    run.feed()
    run.checkpoint.commit([run.stream])
    assert "commit" not in run.events and run.stats.rewinds == 1
    rewound = run.tasks[run.stream]
    assert rewound is not run.task and rewound.position == run.task.committed.safe_offset


def test_a_fenced_commit_drops_the_stream_and_reports_it() -> None:
    run = Setup()
    run.feed()
    run.memory.take(run.stream)  # another node takes the stream
    run.checkpoint.commit([run.stream])
    assert run.tasks == {} and run.coordinator.fenced == [run.stream]
    assert run.stats.commits == 0 and run.store.version(run.stream) is None


def test_a_state_that_did_not_move_is_not_written_again() -> None:
    run = Setup()
    run.feed()
    run.checkpoint.commit([run.stream])
    run.events.clear()
    run.checkpoint.commit([run.stream])
    assert run.events == [] and run.stats.skipped_commits == 1 and run.stats.commits == 1
