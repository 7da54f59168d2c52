"""The kit's input: fragments, watermarks and the end of input, encoded as a producer would."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeAlias

from framework.kernel.errors import InvalidArgument, WrongType
from framework.kernel.limits import MIN_EVENT_TIME_MS
from framework.kernel.records import StreamRecord
from framework.kernel.watermark import Watermark
from router.errors import MalformedLine
from router.fragment import ParsedFragment, epoch_ms
from router.hashing import stream_for_key
from router.naming import stream_name
from router.wire import encode_fragment, encode_watermark

__all__ = [
    "APP",
    "EndOfInput",
    "Input",
    "Time",
    "encode_inputs",
    "end",
    "frag",
    "watermark",
]

APP = "test"
"""The app name of the kit's streams: `test.stream.0000`, `test.stream.0001`, ..."""

Time: TypeAlias = int | datetime | str
"""Epoch milliseconds, an aware datetime, or ISO 8601 text with a zone ("2024-01-01T10:00Z")."""


@dataclass(frozen=True, slots=True)
class EndOfInput:
    """The end of bounded input, on every stream, at `timestamp_ms` (None: the latest so far)."""

    timestamp_ms: int | None = None


Input: TypeAlias = ParsedFragment | Watermark | EndOfInput
"""One input record: a fragment, a watermark (to every stream), or the end of input."""


def frag(key: str, at: Time, /, **fields: Any) -> ParsedFragment:
    """A fragment of session `key` with event time `at` and these fields."""
    return ParsedFragment(key, _ms(at), fields)


def watermark(at: Time, /) -> Watermark:
    """A watermark at `at`, written to every stream as a producer does for lagging streams."""
    return Watermark(_ms(at))


def end(at: Time | None = None, /) -> EndOfInput:
    """The end of input (closes every open session); default time: the latest event time so far."""
    return EndOfInput(None if at is None else _ms(at))


def encode_inputs(
    items: list[Input], streams: int, end_of_input: bool
) -> tuple[list[StreamRecord], dict[str, list[tuple[int, ParsedFragment]]]]:
    """The records a producer would write, in order, and each stream's fragments by offset.

    Fragments go to the stream `router.hashing.stream_for_key` names, watermarks and
    the end of input to every stream; `end_of_input` appends `end()` unless the
    inputs already end with one. Raises `InvalidArgument` (a ValueError) for what a
    producer could not send.
    """
    if isinstance(streams, bool) or not isinstance(streams, int) or streams < 1:
        raise InvalidArgument(f"streams must be an int >= 1, got {streams!r}")
    if end_of_input and not (items and _ends(items[-1])):
        items = [*items, EndOfInput()]
    names = [stream_name(APP, index) for index in range(streams)]
    fragments: dict[str, list[tuple[int, ParsedFragment]]] = {name: [] for name in names}
    offsets = dict.fromkeys(names, 0)
    records: list[StreamRecord] = []
    latest = MIN_EVENT_TIME_MS
    for index, item in enumerate(items):
        if isinstance(item, ParsedFragment):
            try:
                key, value = encode_fragment(item)
            except MalformedLine as exc:
                raise InvalidArgument(f"input {index} cannot be produced: {exc}") from exc
            name = names[stream_for_key(item.key, streams)]
            fragments[name].append((offsets[name], item))
            records.append(StreamRecord(name, offsets[name], key, value, item.timestamp_ms, None))
            offsets[name] += 1
            latest = max(latest, item.timestamp_ms)
            continue
        if isinstance(item, EndOfInput):
            item = Watermark(latest if item.timestamp_ms is None else item.timestamp_ms, end=True)
        if not isinstance(item, Watermark):
            raise WrongType(
                f"input {index} is a {type(item).__name__}: use frag(), watermark() or end()"
            )
        try:
            value, headers = encode_watermark(item)
        except ValueError as exc:
            raise InvalidArgument(f"input {index} cannot be produced: {exc}") from exc
        for name in names:
            stamp = item.timestamp_ms
            records.append(StreamRecord(name, offsets[name], None, value, stamp, headers))
            offsets[name] += 1
        latest = max(latest, item.timestamp_ms)
    return records, fragments


def _ends(item: Input) -> bool:
    return isinstance(item, EndOfInput) or (isinstance(item, Watermark) and item.end)


def _ms(at: Time) -> int:
    """Epoch milliseconds of an event time given as ms, an aware datetime or ISO 8601 text."""
    if isinstance(at, int) and not isinstance(at, bool):
        return at
    moment = datetime.fromisoformat(at) if isinstance(at, str) else at
    if not isinstance(moment, datetime):
        raise WrongType(f"an event time is epoch ms, a datetime or ISO 8601 text, not {at!r}")
    if moment.tzinfo is None:
        raise InvalidArgument(f"event time {at!r} has no time zone: add 'Z' or '+00:00'")
    return epoch_ms(moment)
