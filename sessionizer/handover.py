"""An engine's whole state as bytes, and back: what a planned move hands to the next owner.

On a planned release the old owner commits and then exports its engine
(`export_engine`): the open sessions with their folded state, the raw fragments
still inside the grace window, the key timelines and their schedule, the
tracker (open sessions, parked records, ignore list), stream time and a parked
far-future record.  The next owner rebuilds the engine from it
(`restore_engine`) and reads on from the committed offset instead of replaying
from the safe offset (docs/sessions.md, "Handover").

The engine owns what is handed over: `SessionEngine.export_state()` returns it
as an `EngineState` and `SessionEngine.restore` builds an engine from one
(`sessionizer.engine_state`).  This module is the codec only: it turns an
`EngineState` into the document, on top of the parts' `export_state` /
`restore_state` (`KeyTimeline`, `Segment`, `SafeOffsetTracker`,
`ProducerClocks`), and back.

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

from framework.kernel.errors import StreamError
from framework.kernel.fragment import Fragment
from framework.kernel.watermark import Watermark as AnyWatermark
from sessionizer.engine import SessionEngine
from sessionizer.engine_state import EngineState, Parked
from sessionizer.errors import HookError, SessionError
from sessionizer.handover_check import engine_problem
from sessionizer.processor import StreamProcessor, Timing
from sessionizer.producer_clocks import ProducerClocks
from sessionizer.records import Record
from sessionizer.session_bytes import session_dumper
from sessionizer.timeline import KeyTimeline
from state.record import StreamState
from state.tracker import IGNORE_LIST_BUDGET_BYTES, SafeOffsetTracker

__all__ = [
    "FORMAT_VERSION",
    "HandoverUnavailable",
    "decode_state",
    "encode_state",
    "export_engine",
    "processor_identity",
    "restore_engine",
]

FORMAT_VERSION: Final = 1

_DECODE_ERRORS = (
    KeyError,
    TypeError,
    ValueError,
    IndexError,
    AttributeError,
    msgpack.UnpackException,
)


class HandoverUnavailable(SessionError, StreamError):
    """The engine cannot be handed over or taken over; the stream replays from its safe offset."""

    def __init__(self, stream: str, reason: str) -> None:
        self.reason = reason
        super().__init__(
            stream,
            f"no handover ({reason}); the next owner replays from the safe "
            "offset, which gives the same output",
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
    document = {
        "v": FORMAT_VERSION,
        "processor": processor_identity(engine.processor),
        "timing": list(astuple(engine.timing)),
        "budget": engine.ignore_budget_bytes,
        "engine": encode_state(engine.export_state(), _dumper(engine.processor, engine.stream)),
    }
    try:
        packed: bytes = msgpack.packb(document, use_bin_type=True, strict_types=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise HandoverUnavailable(engine.stream, f"a fragment cannot be packed: {exc}") from exc
    return packed


def encode_state(saved: EngineState, dump: Callable[[Any], bytes]) -> dict[str, Any]:
    """The document's engine map (msgpack-able) of `saved`; `dump` packs a session object.

    Its keys are `sessionizer.handover_check.ENGINE_FIELDS`.
    """
    parked = saved.parked
    timelines = {timeline.key: timeline for timeline in saved.timelines}
    return {
        "time": saved.stream_time_ms,
        "tracker": saved.tracker.export_state(lambda at, key: timelines[key].opened_before(at)),
        "timelines": [timeline.export_state(dump) for timeline in saved.timelines],
        "deadlines": [list(item) for item in saved.deadlines],
        "folds": [list(item) for item in saved.folds],
        "parked": None if parked is None else _parked_data(parked),
        "clocks": saved.clocks.export_state(),
    }


def decode_state(
    data: Mapping[str, Any], load: Callable[[bytes], Any], timing: Timing
) -> EngineState:
    """The `EngineState` of a checked engine map (`engine_problem` found nothing in it)."""
    return EngineState(
        stream_time_ms=data["time"],
        tracker=SafeOffsetTracker.restore_state(data["tracker"]),
        timelines=tuple(KeyTimeline.restore_state(item, load) for item in data["timelines"]),
        deadlines=tuple((due, key) for due, key in data["deadlines"]),
        folds=tuple((due, key) for due, key in data["folds"]),
        parked=None if data["parked"] is None else _parked_from(data["parked"]),
        clocks=ProducerClocks.restore_state(data["clocks"], timing.max_producer_skew_ms),
    )


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
    try:
        engine = SessionEngine.restore(
            processor,
            state,
            decode_state(saved, _loader(processor), settings),
            ignore_budget_bytes=ignore_budget_bytes,
        )
        read_up_to = engine.next_offset
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


def _show(value: object, limit: int = 120) -> str:
    """A bounded repr of a decoded value, for a reason text."""
    return repr(value)[:limit]


def _dumper(processor: StreamProcessor[Any], stream: str) -> Callable[[Any], bytes]:
    """Pack one session object; one that cannot be packed makes the handover unavailable."""
    return session_dumper(processor, lambda message: HandoverUnavailable(stream, message))


def _loader(processor: StreamProcessor[Any]) -> Callable[[bytes], Any]:
    def load(packed: bytes) -> Any:
        data = msgpack.unpackb(packed, raw=False, strict_map_key=False)
        try:
            return processor.load_session(data)
        except Exception as exc:  # user code: replay instead
            raise HookError(f"load_session failed: {type(exc).__name__}: {exc}") from exc

    return load


def _parked_data(parked: Parked) -> list[Any]:
    record = parked.record
    body: list[Any]
    if isinstance(record, AnyWatermark):
        # A parked watermark keeps its producer: when confirmed, it moves that one's clock.
        body = [None, record.timestamp_ms, [record.end, record.producer], record.offset]
    else:
        body = [record.key, record.timestamp_ms, record.value, record.offset]
    return [body, parked.event_time_ms, parked.stream_time_ms]


def _parked_from(data: list[Any]) -> Parked:
    (key, timestamp, rest, offset), event_time, stream_time = data
    record: Record = (
        AnyWatermark(timestamp, end=rest[0], offset=offset, producer=rest[1])
        if key is None
        else Fragment(offset, key, timestamp, rest)
    )
    return Parked(record, event_time, stream_time)
