"""Runs: each stream through the node's own `StreamTask`, optionally crashing its owner."""

from __future__ import annotations

import copy
from collections import defaultdict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from framework.kernel.errors import InvalidArgument, WrongType
from framework.kernel.records import StreamRecord
from framework.node.task import Output, StreamTask
from framework.testkit.inputs import Input, encode_inputs
from framework.testkit.written import as_written
from router.fragment import ParsedFragment
from sessionizer.processor import StreamProcessor
from sessionizer.records import FinishedSession
from sessionizer.sinks import DeadLetter, MemorySink
from state.record import DEFAULT_LIMIT_BYTES, StreamState

__all__ = [
    "NO_CRASH",
    "CrashPoints",
    "Emission",
    "Owner",
    "ProcessorSource",
    "RunLog",
    "RunResult",
    "crash_points",
    "fresh_processor",
    "run",
    "run_with_crashes",
    "simulate",
]

ProcessorSource: TypeAlias = StreamProcessor[Any] | Callable[[], StreamProcessor[Any]]
"""A processor (deep-copied for each owner) or a class or factory (called for each owner)."""
CrashPoints: TypeAlias = frozenset[int] | Literal["every"]
"""The offsets after which a stream's owner crashes, or after every offset."""
NO_CRASH: CrashPoints = frozenset()


@dataclass
class RunResult:
    """What the node wrote: sessions and dead letters in emission order (duplicates included)."""

    sessions: list[FinishedSession] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    crashes: int = 0
    """How many owners crashed (`run_with_crashes`)."""

    def by_key(self) -> dict[str, list[FinishedSession]]:
        """The sessions grouped by session key, each list in emission order."""
        grouped: dict[str, list[FinishedSession]] = defaultdict(list)
        for session in self.sessions:
            grouped[session.key].append(session)
        return dict(grouped)

    def unique(self) -> RunResult:
        """The same run without repeated sessions and dead letters (the first copy is kept)."""
        sessions = {s.session_id: s for s in reversed(self.sessions)}
        letters = {(d.stream, d.offset, d.reason): d for d in reversed(self.dead_letters)}
        return RunResult(
            [s for s in self.sessions if sessions[s.session_id] is s],
            [d for d in self.dead_letters if letters[d.stream, d.offset, d.reason] is d],
            self.crashes,
        )


def run(
    processor: ProcessorSource,
    inputs: Iterable[Input],
    *,
    streams: int = 1,
    end_of_input: bool = True,
) -> RunResult:
    """Run `inputs` through one node, uninterrupted.

    `end_of_input` appends `end()` unless the inputs already end with one, as
    `sessionizer produce --end-of-input` does; without it, open sessions stay open.
    """
    return simulate(processor, inputs, streams, end_of_input, NO_CRASH, 0).result


def run_with_crashes(
    processor: ProcessorSource,
    inputs: Iterable[Input],
    *,
    crash_at: Iterable[int] | Literal["every"] = "every",
    uncommitted: int = 0,
    streams: int = 1,
    end_of_input: bool = True,
) -> RunResult:
    """Run `inputs`, crashing the owner of each stream after each offset in `crash_at`.

    An owner stores the stream's state after every record it reads (except while
    it re-reads what its predecessor had read, as a node does), but the last
    `uncommitted` records before a crash are not covered by a stored state. A new
    owner, with a fresh processor, resumes from the stored state and re-emits what
    a node would. Offsets count per stream from 0 (with one stream, the index in
    `inputs`); "every" crashes after every offset. A stream too short to reach an
    offset does not crash there, so a sample of input indices fits any `streams`.
    """
    points = crash_points(crash_at)
    return simulate(processor, inputs, streams, end_of_input, points, uncommitted).result


@dataclass
class Owner:
    """One owner's life on one stream: its task, the state it started from, what it emitted."""

    number: int
    start: StreamState
    task: StreamTask
    crash: int | None = None
    """The offset after which its predecessor crashed (None: the first owner)."""
    states: deque[tuple[int, StreamState]] = field(default_factory=deque)
    """The last states it could have stored, by read position."""
    emitted: list[Emission] = field(default_factory=list)

    def story(self) -> str:
        """Where this owner came from, for an error message."""
        if self.crash is None:
            return f"by the first owner of {self.start.stream}, before any crash"
        return (
            f"by owner {self.number + 1} of {self.start.stream}, after a crash after offset "
            f"{self.crash} (resumed from safe offset {self.start.safe_offset}, stored read "
            f"position {self.start.committed_offset})"
        )


@dataclass(frozen=True, slots=True)
class Emission:
    """One output as the sink received it, who emitted it, and the record that produced it."""

    output: Output
    owner: Owner
    offset: int


@dataclass
class RunLog:
    """A run, with what the checks need beyond its `RunResult`."""

    name: str
    """The processor's class name."""
    result: RunResult
    fragments: dict[str, list[tuple[int, ParsedFragment]]]
    """Each stream's fragments with their offsets."""
    emissions: list[Emission] = field(default_factory=list)
    durable: list[Emission] = field(default_factory=list)
    """Emitted before a state its owner stored, or by a stream's last owner."""


def simulate(
    processor: ProcessorSource,
    inputs: Iterable[Input],
    streams: int,
    end_of_input: bool,
    crash_at: CrashPoints,
    uncommitted: int,
) -> RunLog:
    """Run the inputs through one task per stream, crashing and resuming as asked."""
    if isinstance(uncommitted, bool) or not isinstance(uncommitted, int) or uncommitted < 0:
        raise InvalidArgument(f"uncommitted must be an int >= 0, got {uncommitted!r}")
    records, fragments = encode_inputs(list(inputs), streams, end_of_input)
    by_stream: dict[str, list[StreamRecord]] = {name: [] for name in fragments}
    for record in records:
        by_stream[record.topic].append(record)
    _check_reachable(crash_at, len(records), fragments, streams)
    shared = fresh_processor(processor)  # one node owns every stream at first
    sink = MemorySink()
    log = RunLog(type(shared).__name__, RunResult(), fragments)
    keep = uncommitted + 1 if crash_at else 0

    def owner(
        number: int, state: StreamState, made: StreamProcessor[Any], crash: int | None
    ) -> Owner:
        return Owner(number, state, StreamTask.resume(made, state), crash, deque(maxlen=keep))

    def read(current: Owner, record: StreamRecord) -> None:
        for output in current.task.handle(record):
            sessions, letters = len(sink.sessions), len(sink.dead_letters)
            if isinstance(output, FinishedSession):
                # As the node encodes it, or its reference dead letter, as a node's sink would.
                sink.emit(as_written(output))
            else:
                sink.dead_letter(output)
            written: list[Output] = [*sink.sessions[sessions:], *sink.dead_letters[letters:]]
            for item in written:
                current.emitted.append(Emission(item, current, record.offset))
                log.emissions.append(current.emitted[-1])
        position = record.offset + 1
        if keep and position >= current.start.committed_offset:  # a node stores no replay
            current.states.append((position, current.task.snapshot()))

    owners = {name: owner(0, StreamState.initial(name), shared, None) for name in by_stream}
    for record in records:
        stream, current = record.topic, owners[record.topic]
        read(current, record)
        if crash_at != "every" and record.offset not in crash_at:
            continue
        target = record.offset + 1 - uncommitted
        stored = [(position, state) for position, state in current.states if position <= target]
        state = current.start  # if it stored nothing, the state it started from is the last
        if stored:
            position, state = stored[-1]
            state = StreamState.decode(state.encode(limit=DEFAULT_LIMIT_BYTES), stream=stream)
            log.durable.extend(e for e in current.emitted if e.offset < position)
        log.result.crashes += 1
        owners[stream] = owner(current.number + 1, state, fresh_processor(processor), record.offset)
        for again in by_stream[stream][state.safe_offset : record.offset + 1]:
            read(owners[stream], again)  # the new owner re-reads up to where the old one crashed
    if crash_at != "every" and crash_at and not log.result.crashes:  # it would test nothing
        longest = max(len(stream_records) for stream_records in by_stream.values())
        raise InvalidArgument(
            f"no stream reaches an offset in crash_at (the longest of {streams} has offsets "
            f"0..{longest - 1}): choose smaller offsets"
        )
    for current in owners.values():
        log.durable.extend(current.emitted)
    log.result.sessions, log.result.dead_letters = sink.sessions, sink.dead_letters
    return log


def _check_reachable(
    crash_at: CrashPoints,
    records: int,
    fragments: dict[str, list[tuple[int, ParsedFragment]]],
    streams: int,
) -> None:
    """Refuse a crash point past any offset a stream can have: the number of inputs.

    An input takes at most one offset of each stream. A point below that which a
    short stream never reaches crashes only the streams that do, so a sample of
    input indices such as range(0, len(inputs), 25) is valid with any `streams`.
    """
    if crash_at == "every" or not crash_at:
        return
    pieces = sum(len(stream_fragments) for stream_fragments in fragments.values())
    count = pieces + (records - pieces) // streams  # a watermark is on every stream
    if max(crash_at) >= count:
        raise InvalidArgument(
            f"crash_at {max(crash_at)} is past the last offset any stream can have, "
            f"{count - 1} ({count} inputs, the end of input included)"
        )


def crash_points(crash_at: Iterable[int] | Literal["every"]) -> CrashPoints:
    """Validate `crash_at`: offsets (ints >= 0) or "every"."""
    if crash_at == "every":
        return "every"
    if isinstance(crash_at, str):
        raise InvalidArgument(f'crash_at must be offsets or "every", got {crash_at!r}')
    points = frozenset(crash_at)
    bad = [p for p in points if isinstance(p, bool) or not isinstance(p, int) or p < 0]
    if bad:
        raise InvalidArgument(f"crash_at must be offsets (ints >= 0), got {bad[0]!r}")
    return points


def fresh_processor(processor: ProcessorSource) -> StreamProcessor[Any]:
    """A processor for a new owner: a deep copy of an instance, or a new one from a factory."""
    if isinstance(processor, StreamProcessor):
        try:
            return copy.deepcopy(processor)
        except (TypeError, copy.Error) as exc:
            raise WrongType(
                f"cannot copy {type(processor).__name__} for a new owner ({exc}): "
                "pass its class or a factory instead"
            ) from exc
    made = processor()
    if not isinstance(made, StreamProcessor):
        raise WrongType(f"the factory returned a {type(made).__name__}, not a StreamProcessor")
    return made
