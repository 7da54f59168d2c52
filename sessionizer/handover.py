"""An engine's whole state as bytes, and back: what a planned move hands to the next owner.

On a planned release the old owner commits and then exports its engine
(`export_engine`): the open sessions with their folded state, the raw fragments
still inside the grace window, the key timelines and their schedule, the
tracker (open sessions, parked records, ignore list), stream time and a parked
far-future record.  The next owner rebuilds the engine from it
(`restore_engine`) and reads on from the committed offset instead of replaying
from the safe offset (docs/sessions.md, "Handover").

The engine's own attributes are read and written here, in one place, on top of
the parts' `export_state` / `restore_state` (`KeyTimeline`, `Segment`,
`SafeOffsetTracker`).  `CARRIED`, `REBUILT` and `PER_OWNER` name every engine
attribute; a test fails when the engine gains one that is in none of them.

Safety: `restore_engine` refuses (raises `HandoverUnavailable`, and the node
replays) data of another format, processor, timing (every processor setting the
engine reads, `Timing`) or ignore-list budget, data it cannot decode, a
document whose fields are out of range or do not extend the state record the
new owner loaded (`sessionizer.handover_check`: open sessions against the
tracker, offsets within [safe, committed), counts, times), and a restored
engine whose snapshot at the committed offset differs from that record.  It
never raises anything else, for any bytes.  So a handover can make a move
cheaper but never change what the stream outputs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import astuple, replace
from typing import Any, Final

import msgpack

from framework.kernel.watermark import Watermark as AnyWatermark
from sessionizer.engine import SessionEngine, _Parked
from sessionizer.errors import SessionError
from sessionizer.handover_check import engine_problem
from sessionizer.processor import StreamProcessor, Timing
from sessionizer.producer_clocks import ProducerClocks
from sessionizer.records import Fragment, Record
from sessionizer.timeline import KeyTimeline
from state.record import StreamState
from state.tracker import IGNORE_LIST_BUDGET_BYTES, SafeOffsetTracker

__all__ = [
    "CARRIED",
    "FORMAT_VERSION",
    "PER_OWNER",
    "REBUILT",
    "HandoverUnavailable",
    "export_engine",
    "processor_identity",
    "restore_engine",
]

FORMAT_VERSION: Final = 1
CARRIED: Final = (
    "_stream_time",
    "_tracker",
    "_timelines",
    "_deadlines",
    "_folds",
    "_parked",
    "_clocks",
)
"""The engine attributes a handover carries."""
REBUILT: Final = ("stream", "processor", "timing", "_epoch", "_budget")
"""The engine attributes the next owner's constructor sets (from its processor and state)."""
PER_OWNER: Final = (
    "_fragments",
    "_watermarks",
    "_sessions",
    "_late",
    "_skipped",
    "_hook_failures",
    "_future",
    "_truncated",
    "_invalid_watermarks",
)
"""The engine's counters: what this owner did, so they start at zero on the next."""

_DECODE_ERRORS = (
    KeyError,
    TypeError,
    ValueError,
    IndexError,
    AttributeError,
    msgpack.UnpackException,
)


class HandoverUnavailable(SessionError):
    """The engine cannot be handed over or taken over; the stream replays from its safe offset."""

    def __init__(self, stream: str, reason: str) -> None:
        self.stream = stream
        self.reason = reason
        super().__init__(
            f"stream {stream}: no handover ({reason}); the next owner replays from the safe "
            "offset, which gives the same output"
        )


def processor_identity(processor: StreamProcessor[Any]) -> str:
    """`module:qualname` of the processor's class, plus `@version` when it defines `version`."""
    kind = type(processor)
    name = f"{kind.__module__}:{kind.__qualname__}"
    version = getattr(processor, "version", None)
    return name if version is None else f"{name}@{version}"


def export_engine(engine: SessionEngine) -> bytes:
    """Return the engine's whole state as bytes; raise `HandoverUnavailable` if it cannot be.

    A session object the processor cannot dump (the default accepts plain msgpack
    types only, see `StreamProcessor.dump_session`) makes the whole stream replay.
    """
    dump = _dumper(engine)
    parked = engine._parked
    state = {
        "time": engine._stream_time,
        "tracker": engine._tracker.export_state(),
        "timelines": [timeline.export_state(dump) for timeline in engine._timelines.values()],
        "deadlines": [list(item) for item in engine._deadlines],
        "folds": [list(item) for item in engine._folds],
        "parked": None if parked is None else _parked_data(parked),
        "clocks": engine._clocks.export_state(),
    }
    document = {
        "v": FORMAT_VERSION,
        "processor": processor_identity(engine.processor),
        "timing": list(astuple(engine.timing)),
        "budget": engine._budget,
        "engine": state,
    }
    try:
        packed: bytes = msgpack.packb(document, use_bin_type=True, strict_types=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise HandoverUnavailable(engine.stream, f"a fragment cannot be packed: {exc}") from exc
    return packed


def restore_engine(
    processor: StreamProcessor[Any],
    state: StreamState,
    data: bytes,
    *,
    ignore_budget_bytes: int = IGNORE_LIST_BUDGET_BYTES,
) -> SessionEngine:
    """Rebuild the engine `export_engine` saved, for the owner that loaded `state`.

    Raise `HandoverUnavailable` (naming why) for data of another format, processor
    identity or timing, undecodable data, or an engine that disagrees with `state`.
    """
    stream = state.stream
    try:
        document = msgpack.unpackb(data, raw=False, strict_map_key=False)
        version, identity = document["v"], document["processor"]
        timing, budget, saved = document["timing"], document["budget"], document["engine"]
    except _DECODE_ERRORS as exc:
        raise HandoverUnavailable(stream, f"undecodable: {exc!r}") from exc
    if type(version) is not int or version != FORMAT_VERSION:
        raise HandoverUnavailable(stream, f"format version {_show(version)}, not {FORMAT_VERSION}")
    mine = processor_identity(processor)
    if identity != mine:
        raise HandoverUnavailable(
            stream, f"written by processor {_show(identity)}, this is {mine!r}"
        )
    settings = Timing.of(processor)
    if timing != list(astuple(settings)):
        raise HandoverUnavailable(
            stream, f"written with other timing settings {_show(timing)}, not {settings}"
        )
    if type(budget) is not int or budget != ignore_budget_bytes:
        raise HandoverUnavailable(
            stream, f"written with ignore-list budget {_show(budget)}, not {ignore_budget_bytes}"
        )
    # Before anything is built from it: every field in range, and consistent with `state`.
    problem = engine_problem(saved, state, settings)
    if problem is not None:
        raise HandoverUnavailable(stream, f"the engine state does not extend the record: {problem}")
    engine = SessionEngine(stream, processor, resume=state, ignore_budget_bytes=ignore_budget_bytes)
    try:
        _restore(engine, saved, _loader(processor))
        read_up_to = engine._tracker.next_offset
        check = engine.snapshot(state.committed_offset)
    except HandoverUnavailable:
        raise
    except _DECODE_ERRORS as exc:
        raise HandoverUnavailable(stream, f"undecodable engine state: {exc!r}") from exc
    except SessionError as exc:
        raise HandoverUnavailable(stream, f"inconsistent engine state: {exc}") from exc
    if read_up_to != state.committed_offset or replace(check, user_blob=state.user_blob) != state:
        raise HandoverUnavailable(stream, "the restored engine disagrees with the stored state")
    return engine


def _restore(engine: SessionEngine, saved: Mapping[str, Any], load: Callable[[bytes], Any]) -> None:
    engine._stream_time = saved["time"]
    engine._tracker = SafeOffsetTracker.restore_state(saved["tracker"])
    timelines = [KeyTimeline.restore_state(item, load) for item in saved["timelines"]]
    engine._timelines = {timeline.key: timeline for timeline in timelines}
    engine._deadlines = [(due, key) for due, key in saved["deadlines"]]
    engine._folds = [(due, key) for due, key in saved["folds"]]
    parked = saved["parked"]
    engine._parked = None if parked is None else _parked_from(parked)
    skew = engine.timing.max_producer_skew_ms
    engine._clocks = ProducerClocks.restore_state(saved["clocks"], skew)


def _show(value: object, limit: int = 120) -> str:
    """A bounded repr of a decoded value, for a reason text."""
    return repr(value)[:limit]


def _dumper(engine: SessionEngine) -> Callable[[Any], bytes]:
    """Pack one session object: exact msgpack types by default, else the processor's hook."""
    processor, stream = engine.processor, engine.stream
    custom = type(processor).dump_session is not StreamProcessor.dump_session

    def dump(session: Any) -> bytes:
        try:
            if custom:
                packed: bytes = msgpack.packb(processor.dump_session(session), use_bin_type=True)
            else:
                packed = msgpack.packb(session, use_bin_type=True, strict_types=True)
        except Exception as exc:  # user code or an unsupported type: replay instead
            kind = type(session).__name__
            raise HandoverUnavailable(
                stream,
                f"{type(processor).__name__} cannot dump a session object of type {kind} "
                f"({type(exc).__name__}: {exc}); define dump_session/load_session",
            ) from exc
        return packed

    return dump


def _loader(processor: StreamProcessor[Any]) -> Callable[[bytes], Any]:
    def load(packed: bytes) -> Any:
        data = msgpack.unpackb(packed, raw=False, strict_map_key=False)
        try:
            return processor.load_session(data)
        except Exception as exc:  # user code: replay instead
            raise ValueError(f"load_session failed: {type(exc).__name__}: {exc}") from exc

    return load


def _parked_data(parked: _Parked) -> list[Any]:
    record = parked.record
    body: list[Any]
    if isinstance(record, AnyWatermark):
        # A parked watermark keeps its producer: when confirmed, it moves that one's clock.
        body = [None, record.timestamp_ms, [record.end, record.producer], record.offset]
    else:
        body = [record.key, record.timestamp_ms, record.value, record.offset]
    return [body, parked.event_time_ms, parked.stream_time_ms]


def _parked_from(data: list[Any]) -> _Parked:
    (key, timestamp, rest, offset), event_time, stream_time = data
    record: Record = (
        AnyWatermark(timestamp, end=rest[0], offset=offset, producer=rest[1])
        if key is None
        else Fragment(offset, key, timestamp, rest)
    )
    return _Parked(record, event_time, stream_time)
