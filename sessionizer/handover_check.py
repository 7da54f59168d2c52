"""`engine_problem`: is a decoded handover document an engine that extends this state record?

A handover record's checksum proves that the bytes are the ones its writer
stored, not that the writer was right: a buggy or foreign writer (another
version, a bit flipped before the checksum was taken) can store a document
that decodes but describes another engine.  `restore_engine` checks the
document here, as plain decoded data and before building anything from it, so
that restoring is total (no `OverflowError` from an infinite clock, no
`MemoryError` from `bytearray(2**60)`) and a document that does not extend the
state record the new owner loaded is refused (the stream replays):

- every field has its type, and every number its range: offsets of what is
  still open in [safe offset, committed offset) of the state record, event
  times in `framework.kernel.limits`' range, keys and producer ids within their sizes;
- the open sessions are the tracker's: each session's first offset and key are
  exactly one open entry of the tracker (with the stream time before it), and
  no offset belongs to two sessions;
- each session agrees with itself: its folded count is the number of folded
  offsets stored, its first/last offsets and times bound its members, the raw
  members are in event-time order, its user state is there iff it is needed;
- the schedule fires for every key (its due times are in the heaps, no later
  than the session's deadline and first raw member), the heaps are heaps, the
  parked record is the one the tracker holds the safe offset for, the
  producers' live set is the one their history ends with, and the tracker's
  byte counts and ignore lists are consistent.

`restore_engine` then compares the restored engine's snapshot with the state
record (safe offset, stream time, ignore list, open count, producers).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from itertools import accumulate, pairwise
from typing import Any, Final

from framework.kernel.limits import MAX_EVENT_TIME_MS, MAX_KEY_BYTES, MIN_EVENT_TIME_MS
from framework.kernel.watermark import MAX_PRODUCER_ID_BYTES
from sessionizer.errors import SessionError
from sessionizer.processor import Timing
from state.record import MAX_OFFSET, MAX_PRODUCERS, StreamState
from state.tracker import ENTRY_OVERHEAD_BYTES

__all__ = ["ENGINE_FIELDS", "engine_problem"]

ENGINE_FIELDS: Final = ("time", "tracker", "timelines", "deadlines", "folds", "parked", "clocks")
"""The keys of the document's engine map (`sessionizer.handover.encode_state`)."""

_INT64: Final = (-(2**63), 2**63 - 1)


class _Mismatch(SessionError):
    """One thing wrong with the document (its message says what)."""


def _need(condition: bool, problem: str) -> None:
    if not condition:
        raise _Mismatch(problem)


def _int(value: Any, low: int, high: int, what: str) -> int:
    """`value` if it is an int (not a bool) in [low, high]."""
    _need(type(value) is int and low <= value <= high, f"{what} is not an integer in range")
    return int(value)


def _time(value: Any, what: str) -> int:
    return _int(value, MIN_EVENT_TIME_MS, MAX_EVENT_TIME_MS, f"{what} (an event time)")


def _maybe_time(value: Any, what: str) -> int | None:
    return None if value is None else _time(value, what)


def _bool(value: Any, what: str) -> bool:
    _need(type(value) is bool, f"{what} is not a bool")
    return bool(value)


def _list(value: Any, what: str, length: int | None = None) -> list[Any]:
    _need(isinstance(value, list), f"{what} is not a list")
    _need(length is None or len(value) == length, f"{what} has not {length} items")
    return list(value)


def _text(value: Any, limit: int, what: str) -> str:
    _need(isinstance(value, str) and value != "", f"{what} is not a non-empty string")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        size = limit + 1
    _need(size <= limit, f"{what} is not UTF-8 of at most {limit} bytes")
    return str(value)


def _key(value: Any, what: str) -> str:
    return _text(value, MAX_KEY_BYTES, what)


def _is_heap(items: Sequence[Any]) -> bool:
    return all(items[(i - 1) // 2] <= items[i] for i in range(1, len(items)))


def _varints(buffer: bytes) -> Iterator[int]:
    """The zigzag varint deltas `Segment.absorb` wrote (`_need` fails on a torn one)."""
    value = shift = 0
    for byte in buffer:
        value |= (byte & 0x7F) << shift
        shift += 7
        _need(shift <= 70, "a folded offset is not a 64-bit varint")
        if byte < 0x80:
            yield value >> 1 if not value & 1 else -((value + 1) >> 1)
            value = shift = 0
    _need(shift == 0, "the folded offsets end inside a varint")


class _Checker:
    """One pass over one document, against one state record and timing."""

    def __init__(self, state: StreamState, timing: Timing) -> None:
        self.low, self.high = state.safe_offset, state.committed_offset
        self.timing = timing
        # The largest due time a schedule may hold: a deadline past the last event time.
        self.latest_due = MAX_EVENT_TIME_MS + timing.timeout_ms + 1
        self.seen: set[int] = set()  # offsets of every open session's members
        self.key = ""  # the key whose sessions are being checked

    def live_offset(self, value: Any, what: str) -> int:
        """An offset of something still open: in [safe offset, committed offset)."""
        return _int(value, self.low, self.high - 1, f"{what} (an offset in [safe, committed))")

    def past_offset(self, value: Any, what: str) -> int:
        """An offset of something read already: in [0, committed offset)."""
        return _int(value, 0, self.high - 1, f"{what} (an offset below the committed one)")

    def member_offset(self, value: Any, what: str) -> int:
        offset = self.live_offset(value, what)
        _need(offset not in self.seen, f"{what}: offset {offset} is in two sessions")
        self.seen.add(offset)
        return offset

    def due(self, value: Any, what: str) -> int | None:
        if value is None:
            return None
        return _int(value, MIN_EVENT_TIME_MS, self.latest_due, f"{what} (a due time)")

    def check(self, saved: Any) -> None:
        _need(isinstance(saved, dict), "the engine state is not a map")
        _need(sorted(saved) == sorted(ENGINE_FIELDS), "the engine state has other fields")
        time = _maybe_time(saved["time"], "stream time")
        opened, held = self.tracker(_list(saved["tracker"], "tracker", 9), time)
        keys = self.timelines(_list(saved["timelines"], "timelines"), opened)
        self.heap(saved["deadlines"], "deadlines", keys, 0)
        self.heap(saved["folds"], "folds", keys, 1)
        self.parked(saved["parked"], held)
        self.clocks(saved["clocks"])

    def tracker(
        self, data: list[Any], time: int | None
    ) -> tuple[dict[int, tuple[str, int | None]], dict[int, int | None]]:
        position = _list(data[0], "tracker position", 2)
        _need(
            _int(position[0], 0, MAX_OFFSET, "the tracker's next offset") == self.high,
            "the tracker is not at the committed offset",
        )
        _need(_maybe_time(position[1], "tracker stream time") == time, "two stream times")
        opened: dict[int, tuple[str, int | None]] = {}
        for item in _list(data[1], "open sessions"):
            offset, key, before = _list(item, "an open session", 3)
            offset = self.live_offset(offset, "an open session's first offset")
            _need(offset not in opened, "two open sessions start at one offset")
            opened[offset] = (_key(key, "an open key"), _maybe_time(before, "a stream time"))
        held: dict[int, int | None] = {}
        for item in _list(data[2], "held records"):
            offset, before = _list(item, "a held record", 2)
            offset = self.live_offset(offset, "a held offset")
            _need(offset not in opened and offset not in held, "a held offset repeats")
            held[offset] = _maybe_time(before, "a held record's stream time")
        holders = [self.past_offset(item, "a holder") for item in _list(data[3], "holders")]
        _need(_is_heap(holders), "the holders are not a heap")
        _need(set(opened) | set(held) <= set(holders), "an open session holds no offset")
        self.ignore(data[4:9])
        return opened, held

    def ignore(self, data: list[Any]) -> None:
        heap = [_list(item, "an ignore-heap entry", 2) for item in _list(data[0], "ignore heap")]
        most = MAX_KEY_BYTES + ENTRY_OVERHEAD_BYTES
        costs = [
            (self.past_offset(o, "an ignore offset"), _int(c, 1, most, "an entry's bytes"))
            for o, c in heap
        ]
        _need(_is_heap(costs), "the ignore heap is not a heap")
        _need(
            _int(data[1], 0, MAX_OFFSET, "ignore bytes") == sum(c for _, c in costs),
            "the ignore bytes are not the heap's sum",
        )
        finished = self.groups(data[2], "finished")
        skippable = self.groups(data[3], "skippable")
        _need(not skippable - finished, "a skippable entry is not a finished one")
        current = Counter(
            (entry[3], len(entry[0].encode("utf-8")) + ENTRY_OVERHEAD_BYTES)
            for entry in finished.elements()
        )
        _need(
            current == Counter(item for item in costs if item[0] >= self.low),
            "the ignore heap does not match the finished sessions",
        )
        count, prune_at = _list(data[4], "prune counters", 2)
        _need(
            _int(count, 0, MAX_OFFSET, "finished count") == finished.total(),
            "the finished count is wrong",
        )
        _int(prune_at, 0, MAX_OFFSET, "the next prune")

    def groups(self, data: Any, what: str) -> Counter[tuple[Any, ...]]:
        entries: Counter[tuple[Any, ...]] = Counter()
        keys: set[str] = set()
        for group in _list(data, what):
            items = _list(group, f"a {what} group")
            _need(bool(items), f"an empty {what} group")
            for item in items:
                key, first, last, last_offset, tail = _list(item, f"a {what} entry", 5)
                _need(key == items[0][0], f"a {what} group mixes keys")
                _need(_time(first, "first_ts") <= _time(last, "last_ts"), "first_ts > last_ts")
                tail = self.past_offset(tail, "a tail offset")
                _need(tail <= self.past_offset(last_offset, "a last offset"), "tail > last")
                entries[(_key(key, "an ignored key"), first, last, last_offset, tail)] += 1
            _need(items[0][0] not in keys, f"two {what} groups of one key")
            keys.add(items[0][0])
        _need(all(entry[3] >= self.low for entry in entries), f"a stale {what} entry")
        return entries

    def timelines(
        self, data: list[Any], opened: Mapping[int, tuple[str, int | None]]
    ) -> dict[str, tuple[int | None, int | None]]:
        schedule: dict[str, tuple[int | None, int | None]] = {}
        openers: dict[int, tuple[str, int | None]] = {}
        for item in data:
            key, deadline_due, fold_due, sessions = _list(item, "a timeline", 4)
            key = _key(key, "a timeline's key")
            _need(key not in schedule, "two timelines of one key")
            deadline_due = self.due(deadline_due, "a deadline")
            fold_due = self.due(fold_due, "a fold time")
            segments = _list(sessions, "a key's sessions")
            _need(bool(segments), "a timeline without sessions")
            first_raw: int | None = None
            self.key = key
            for segment in segments:
                offset, before, raw_ts = self.segment(segment)
                _need(offset not in openers, "two sessions start at one offset")
                openers[offset] = (key, before)
                first_raw = raw_ts if first_raw is None else first_raw
            # Each key must fire no later than its first session can close or fold.
            _need(
                deadline_due is not None and deadline_due <= self.deadline(segments[0]),
                f"key {key[:80]!r} is not scheduled for its first session's deadline",
            )
            _need(
                first_raw is None or (fold_due is not None and fold_due <= first_raw + 1),
                f"key {key[:80]!r} is not scheduled to fold its first raw fragment",
            )
            schedule[key] = (deadline_due, fold_due)
        _need(
            openers == dict(opened),
            "the open sessions (first offset, key) are not the tracker's open sessions",
        )
        return schedule

    def segment(self, data: Any) -> tuple[int, int | None, int | None]:
        """Check one session; return its first offset, the stream time before it, and the
        event time of its first raw member (None: all folded)."""
        raw, is_list, head, tail, offsets, state, failure = _list(data, "a session", 7)
        members = [self.member(item) for item in _list(raw, "raw members")]
        _need(_bool(is_list, "raw is a list") or not members, "raw members in a tuple")
        _need(
            all(a[:2] < b[:2] for a, b in pairwise(members)),
            "raw members are not in event-time order",
        )
        first_ts, first_offset, last_offset, folded = _list(head, "a session's head", 4)
        tail_ts, tail_offset, tail_end, opener_offset, opener_time = _list(tail, "a tail", 5)
        _need(isinstance(offsets, bytes), "the folded offsets are not bytes")
        folded = _int(folded, 0, len(offsets), "the folded count")
        deltas = list(_varints(offsets))
        _need(len(deltas) == folded, "the folded count is not the folded offsets' count")
        _need(folded + len(members) > 0, "a session without fragments")
        _bool(tail_end, "tail_end")
        times = [member[0] for member in members]
        offsets_of = [member[1] for member in members]
        before = [(member[1], member[3]) for member in members]
        if folded:
            stored = list(accumulate(deltas))
            for offset in stored:
                self.member_offset(offset, "a folded offset")
            _need(self.live_offset(tail_offset, "tail") == stored[-1], "a wrong tail offset")
            _need(self.live_offset(opener_offset, "opener") == min(stored), "a wrong opener")
            opener = (opener_offset, _maybe_time(opener_time, "opener time"))
            times.insert(0, _time(tail_ts, "tail_ts"))
            offsets_of += stored
            before.append(opener)
            _need(not members or times[0] <= members[0][0], "raw members sort before folded")
            _need(folded > 1 or tail_ts == first_ts, "one folded fragment, two event times")
        else:
            stored = []
            _need(tail == [0, 0, False, 0, None], "an unfolded session has a tail")
        _need(
            state is None if not folded or failure is not None else isinstance(state, bytes),
            "the session object is missing or stray",
        )
        self.failure(failure, stored)
        _need(_time(first_ts, "first_ts") <= min(times), "first_ts is after a member")
        _need(not members or folded > 0 or first_ts == members[0][0], "a wrong first_ts")
        first_offset = self.live_offset(first_offset, "first_offset")
        _need(first_offset == min(offsets_of), "first_offset is not the smallest offset")
        _need(self.live_offset(last_offset, "last") == max(offsets_of), "a wrong last_offset")
        opened_at = min(before, key=lambda item: item[0])
        return opened_at[0], opened_at[1], members[0][0] if members else None

    def member(self, data: Any) -> tuple[int, int, bool, int | None]:
        event_time, offset, is_end, before, record_ts, fields = _list(data, "a member", 6)
        _int(record_ts, *_INT64, "a record timestamp")
        _need(isinstance(fields, dict), "a member's fields are not a map")
        return (
            _time(event_time, "a member's event time"),
            self.member_offset(offset, "a member"),
            _bool(is_end, "is_end"),
            _maybe_time(before, "a member's stream time"),
        )

    def failure(self, data: Any, folded: Sequence[int]) -> None:
        """A failed session's hook, error and the fragment it failed on (a folded one)."""
        if data is None:
            return
        _need(bool(folded), "a session failed before a fragment was folded")
        hook, error, fragment = _list(data, "a failure", 3)
        _need(isinstance(hook, str) and isinstance(error, str), "a failure's texts")
        if fragment is not None:
            offset, key, timestamp, value = _list(fragment, "a failed fragment", 4)
            _need(self.live_offset(offset, "a failed fragment") in folded, "a stray failure")
            _need(_key(key, "a failed fragment's key") == self.key, "a failure of another key")
            _int(timestamp, *_INT64, "a failed fragment's timestamp")
            _need(isinstance(value, dict), "a failed fragment's fields")

    def deadline(self, segment: list[Any]) -> int:
        """`Segment.deadline` of a checked session's plain data."""
        raw, head, tail = segment[0], segment[2], segment[3]
        last, ends = (raw[-1][0], raw[-1][2]) if raw else (tail[0], tail[2])
        deadline: int = last if ends else last + self.timing.timeout_ms + 1
        if self.timing.max_duration_ms is not None:
            deadline = min(deadline, head[0] + self.timing.max_duration_ms)
        return deadline

    def heap(
        self,
        data: Any,
        what: str,
        schedule: Mapping[str, tuple[int | None, int | None]],
        index: int,
    ) -> None:
        items = [_list(item, f"a {what} entry", 2) for item in _list(data, what)]
        entries = [(self.due(due, what), _key(key, f"a {what} key")) for due, key in items]
        _need(all(due is not None for due, _ in entries), f"a {what} entry without a time")
        _need(_is_heap(entries), f"the {what} are not a heap")
        present = set(entries)
        for key, dues in schedule.items():
            due = dues[index]
            _need(due is None or (due, key) in present, f"a scheduled {what} is not in its heap")

    def parked(self, data: Any, held: Mapping[int, int | None]) -> None:
        if data is None:
            _need(not held, "the tracker holds an offset for no parked record")
            return
        body, event_time, stream_time = _list(data, "the parked record", 3)
        key, timestamp, rest, offset = _list(body, "the parked record's body", 4)
        _time(event_time, "the parked record's event time")
        if key is None:
            end, producer = _list(rest, "a parked watermark", 2)
            _bool(end, "a parked watermark's end")
            _need(producer is None or isinstance(producer, str), "a parked producer id")
            _int(timestamp, *_INT64, "a parked watermark's time")
        else:
            _key(key, "the parked key")
            _int(timestamp, *_INT64, "a parked timestamp")
            _need(isinstance(rest, dict), "the parked fragment's fields")
        offset = self.live_offset(offset, "the parked offset")
        time = _maybe_time(stream_time, "the parked stream time")
        _need(dict(held) == {offset: time}, "the tracker does not hold the parked record")

    def clocks(self, data: Any) -> None:
        _need(
            isinstance(data, dict) and sorted(data) == ["base", "history", "live"],
            "the producers' clocks are not a map of live, base and history",
        )
        live, base = self.producers(data["live"]), self.producers(data["base"])
        last, previous = base, -1
        for item in _list(data["history"], "the producers' history"):
            offset, saved = _list(item, "a producers' history entry", 2)
            offset = self.live_offset(offset, "a producers' history offset")
            _need(offset > previous, "the producers' history is not in offset order")
            last, previous = self.producers(saved), offset
        _need(live == last, "the live producers are not those their history ends with")

    def producers(self, data: Any) -> list[tuple[str, int | None]]:
        items = [_list(item, "a producer", 2) for item in _list(data, "producers")]
        _need(len(items) <= MAX_PRODUCERS, "too many producers")
        found = [
            (_text(name, MAX_PRODUCER_ID_BYTES, "a producer id"), _maybe_time(clock, "a clock"))
            for name, clock in items
        ]
        names = [name for name, _ in found]
        _need(names == sorted(set(names)), "producers are not sorted by id, or repeat")
        return found


def engine_problem(saved: Any, state: StreamState, timing: Timing) -> str | None:
    """What makes `saved` (the document's engine map) not an engine extending `state`
    under `timing`; None when nothing does.  Never raises, for any decoded data."""
    try:
        _Checker(state, timing).check(saved)
    except _Mismatch as exc:
        return str(exc)
    except (TypeError, ValueError) as exc:  # an unpacking of a wrong shape, say
        return f"malformed: {type(exc).__name__}: {exc}"
    return None
