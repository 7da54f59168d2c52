"""Checks: crashes change nothing (`assert_exact`), and the batch definition (`assert_batch`)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from framework.kernel.fragment import Fragment
from framework.node.task import Output
from framework.testkit.engine_runs import Span, batch_span, session_span
from framework.testkit.inputs import Input
from framework.testkit.runs import (
    NO_CRASH,
    ProcessorSource,
    RunLog,
    RunResult,
    crash_points,
    fresh_processor,
    simulate,
)
from framework.testkit.written import unsendable_problem
from router.fragment import ParsedFragment
from sessionizer.processor import StreamProcessor, Timing
from sessionizer.records import FinishedSession
from sessionizer.reference import batch_sessions

__all__ = ["assert_batch", "assert_exact"]

_DETERMINISM = (
    "hooks must be deterministic: no wall clock, no random numbers, no state kept on the "
    "processor between sessions (docs/sessions.md)"
)
_FRAGMENT_LETTERS = frozenset({"late", "future", "hook:timestamp", "hook:is_end"})
"""Dead-letter reasons of fragments that never reach a session."""


def assert_exact(
    processor: ProcessorSource,
    inputs: Iterable[Input],
    *,
    crash_at: Iterable[int] | Literal["every"] = "every",
    uncommitted: int | Iterable[int] = (0, 3),
    streams: int = 1,
    end_of_input: bool = True,
) -> RunResult:
    """Check that crashes and resumes change nothing; return the uninterrupted run.

    Two uninterrupted runs must agree, and for each value of `uncommitted` the run
    with crashes (see `run_with_crashes`) must emit every session and dead letter
    of the uninterrupted run with the same content, counting only what an owner
    emitted before storing its state (or as a stream's last owner), and nothing
    else; duplicates must be identical. Raises AssertionError at the first
    difference, and for a session the node could not send (its result is run
    through the node's encoder: a test fails where a node would dead-letter).
    Crashing after every offset re-reads, each time, from the oldest
    open session: for long inputs, give `crash_at` a sample of offsets.
    """
    items = list(inputs)
    baseline = simulate(processor, items, streams, end_of_input, NO_CRASH, 0)
    _sendable(baseline)
    again = simulate(processor, items, streams, end_of_input, NO_CRASH, 0)
    _compare(baseline, again, "a second uninterrupted run")
    points = crash_points(crash_at)
    for lag in [uncommitted] if isinstance(uncommitted, int) else uncommitted:
        crashed = simulate(processor, items, streams, end_of_input, points, lag)
        _compare(baseline, crashed, f"a run with crashes (uncommitted={lag})")
    return baseline.result


def assert_batch(
    processor: ProcessorSource,
    inputs: Iterable[Input],
    *,
    streams: int = 1,
    end_of_input: bool = True,
) -> RunResult:
    """Check the sessions of an uninterrupted run against the batch definition; return the run.

    The batch definition (`sessionizer.reference.batch_sessions`, with the
    processor's timeout and max_session_duration) applies to the fragments that
    were not dead-lettered as late, future or by `timestamp`/`is_end`; a session
    whose `open`, `update` or `close` raised is expected among the dead letters
    instead. A session the node could not send (`close()` returned what its
    encoder refuses, or too much) fails the check, as it does in `assert_exact`.
    """
    log = simulate(processor, list(inputs), streams, end_of_input, NO_CRASH, 0)
    _sendable(log)
    judge = fresh_processor(processor)
    timing = Timing.of(judge)
    letters = log.result.dead_letters
    dropped = {(d.stream, d.offset) for d in letters if d.reason in _FRAGMENT_LETTERS}
    failed = {(d.stream, d.offset) for d in letters if d.reason.startswith("hook:")}
    unsendable = {d.key for d in letters if d.reason.startswith("session-")}
    expected: dict[str, Span] = {}
    for stream, fragments in log.fragments.items():
        on_time = [
            Fragment(offset, f.key, _event_time(judge, f), f.fields)
            for offset, f in fragments
            if (stream, offset) not in dropped
        ]
        for batch in batch_sessions(
            on_time, timing.timeout_ms, judge.is_end, max_duration_ms=timing.max_duration_ms
        ):
            ident = batch.session_id(stream)
            if (stream, batch.first_offset) not in failed and ident.encode() not in unsendable:
                expected[ident] = batch_span(batch, stream)
    found = {s.session_id: s for s in log.result.sessions}
    definition = (
        f"the batch definition (timeout {timing.timeout_ms} ms, max duration "
        f"{timing.max_duration_ms} ms)"
    )
    for ident in sorted(expected.keys() | found.keys(), key=_order):
        want, got = expected.get(ident), found.get(ident)
        if got is None:
            assert want is not None
            raise AssertionError(f"{log.name}: {definition} has {_show(want)}, never emitted")
        if want != session_span(got):
            note = " (truncated to bound the stored state)" if got.truncated else ""
            has = "no such session" if want is None else _show(want)
            raise AssertionError(
                f"{log.name}: emitted {_show(session_span(got))}{note}, but {definition} has {has}"
            )
    return log.result


def _sendable(log: RunLog) -> None:
    """Raise AssertionError if the node could not have sent one of the run's sessions."""
    problem = unsendable_problem(log.name, log.result.dead_letters)
    if problem is not None:
        raise AssertionError(problem)


def _compare(baseline: RunLog, other: RunLog, what: str) -> None:
    """Raise AssertionError at the first output of `other` unlike `baseline`'s, or one lost."""
    expected = {_output_id(e.output): e.output for e in baseline.emissions}
    for emission in other.emissions:
        want = expected.get(_output_id(emission.output))
        if want is None:
            raise AssertionError(
                f"{other.name}: {_describe(emission.output)} was emitted in {what} "
                f"{emission.owner.story()}, but not in the uninterrupted run; {_DETERMINISM}"
            )
        if want != emission.output:
            where = f", emitted {emission.owner.story()}" if other.result.crashes else ""
            raise AssertionError(
                f"{other.name}: {_describe(want)} differs in {what}{where}: "
                f"{_difference(want, emission.output)}; {_DETERMINISM}"
            )
    durable = {_output_id(e.output) for e in other.durable}
    for ident, output in expected.items():
        if ident not in durable:
            raise AssertionError(
                f"{other.name}: {_describe(output)} of the uninterrupted run is lost in {what}: "
                "no owner emitted it before storing its state, and no last owner emitted it"
            )


class _Absent:
    def __repr__(self) -> str:
        return "(absent)"


_ABSENT = _Absent()


def _difference(want: Output, got: Output) -> str:
    """The first fields that differ, the uninterrupted run's value first."""
    left, right = _fields(want), _fields(got)
    names = [n for n in {**left, **right} if left.get(n, _ABSENT) != right.get(n, _ABSENT)]
    return "; ".join(
        f"{n} is {left.get(n, _ABSENT)!r} in the uninterrupted run, {right.get(n, _ABSENT)!r} there"
        for n in names[:3]
    )


def _fields(output: Output) -> dict[str, Any]:
    if isinstance(output, FinishedSession):
        return output.to_dict()
    return {n: getattr(output, n) for n in ("stream", "offset", "reason", "error", "key", "value")}


def _output_id(output: Output) -> tuple[str, ...]:
    """What identifies an output across runs: a session's id, a dead letter's record and reason."""
    if isinstance(output, FinishedSession):
        return ("session", output.session_id)
    return ("dead letter", output.stream, str(output.offset), output.reason)


def _describe(output: Output) -> str:
    if isinstance(output, FinishedSession):
        return f"session {output.session_id} (key {output.key!r})"
    return f"dead letter {output.reason!r} of {output.stream} offset {output.offset}"


def _event_time(processor: StreamProcessor[Any], fragment: ParsedFragment) -> int:
    """The event time the engine takes from `timestamp()` (a float is truncated)."""
    return math.trunc(processor.timestamp(fragment.fields, fragment.timestamp_ms))


def _show(span: Span) -> str:
    ident, key, first, last, first_ts, last_ts, count = span
    return (
        f"session {ident} (key {key!r}, offsets {first}..{last}, {count} fragments, "
        f"{_when(first_ts)} to {_when(last_ts)})"
    )


def _when(ms: int) -> str:
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _order(ident: str) -> tuple[str, int]:
    stream, first, _ = ident.rsplit(":", 2)
    return stream, int(first)
