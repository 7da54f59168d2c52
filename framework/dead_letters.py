"""Dead letters read back from `<app>.deadletter`, and the replay of the replayable ones.

A dead letter is replayable when the session it stands for can be rebuilt
exactly by a fixed processor: a session whose `open`, `update` or `close` raised
(`hook:open`, `hook:update`, `hook:close`: one dead letter per fragment, all
naming the lost `session_id`) and a session its `close()` result could not be
encoded for (`session-unencodable`: one reference dead letter). Its boundaries
were decided by the engine without those hooks (docs/sessions.md), so folding
the same fragments again gives what a clean run would have emitted, under the
same `session_id` (stream, first offset, key). Fragments are taken from the
dead letters' bytes, or re-read from the stream at their offsets.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from framework.kafka.consumer import assigned_consumer, partition_zero
from framework.kafka.errors import ClientError
from framework.kernel.errors import SessionizerError
from router.errors import UndecodableRecord
from router.naming import deadletter_topic
from router.wire import decode_parts
from sessionizer.engine import SessionEngine
from sessionizer.processor import StreamProcessor
from sessionizer.records import FinishedSession
from sessionizer.sinks import PAYLOAD_NONE, PAYLOAD_REFERENCE, DeadLetter

__all__ = [
    "REPLAYABLE",
    "DeadLetterCounts",
    "DeadLetterError",
    "Lost",
    "StoredLetter",
    "TopicReader",
    "count_by_stream",
    "lost_sessions",
    "read_fragments",
    "read_letters",
    "replay",
]

REPLAYABLE: Final = frozenset({"hook:open", "hook:update", "hook:close", "session-unencodable"})
"""Reasons whose session a fixed processor can rebuild exactly."""
_POLL_MS: Final = 500

Parts = tuple[str, int, dict[str, Any]]
"""A decoded fragment: (key, record timestamp, fields)."""
Progress = Callable[[str], None]


class DeadLetterError(SessionizerError):
    """Reading dead letters, or the records they name, failed; the message says what to do."""


@dataclass(frozen=True, slots=True)
class StoredLetter:
    """A dead letter as read back, with its own offset in the dead-letter topic."""

    position: int
    letter: DeadLetter


@dataclass
class Lost:
    """One session lost to dead letters: what a replay needs to rebuild it."""

    session_id: str
    stream: str
    key: str
    reason: str
    offsets: set[int] = field(default_factory=set)
    """The session's fragments, when the dead letters name each one (hook failures)."""
    span: tuple[int, int] | None = None
    """First and last offset of a referenced session (its fragments are re-read)."""
    fragments: int = 0
    """How many fragments the session has."""
    held: dict[int, Parts] = field(default_factory=dict)
    """Fragments whose bytes the dead letters carry."""


class TopicReader:
    """Reads single-partition topics between offsets with the project's kafka-python reader."""

    def __init__(self, bootstrap: str, properties: Mapping[str, str], **extra: Any) -> None:
        # Committed records only: an exactly-once node's aborted dead letters are not output.
        extra.setdefault("isolation_level", "read_committed")
        self._consumer = assigned_consumer(
            bootstrap, "sessionizer-deadletters", properties, **extra
        )

    def close(self) -> None:
        """Close the consumer."""
        self._consumer.close()

    def end(self, topic: str) -> int:
        """The topic's end offset (with read_committed: its last stable offset)."""
        partition = partition_zero(topic)
        return int(self._consumer.end_offsets([partition])[partition])

    def read(self, topic: str, start: int, stop: int, *, timeout: float = 120.0) -> Iterable[Any]:
        """Yield the records of `topic` with offsets in [start, stop), in order."""
        if stop <= start:
            return
        partition = partition_zero(topic)
        self._consumer.assign([partition])
        self._consumer.seek(partition, start)
        deadline = time.monotonic() + timeout
        while self._consumer.position(partition) < stop:
            if time.monotonic() > deadline:
                raise DeadLetterError(
                    f"reading {topic} from {start} to {stop} did not finish within {timeout:g} s;"
                    " check that the brokers are up and the records not deleted by retention"
                )
            for records in self._consumer.poll(timeout_ms=_POLL_MS).values():
                for record in records:
                    if record.offset >= stop:
                        return
                    yield record


def read_letters(reader: TopicReader, topic: str) -> list[StoredLetter]:
    """Every dead letter of the topic up to its current end (records that are none are skipped)."""
    letters = []
    for record in reader.read(topic, 0, reader.end(topic)):
        try:
            letter = DeadLetter.from_record(record.key, record.value, record.headers)
        except ValueError:
            continue  # not written by a node (no headers): nothing to list or replay
        letters.append(StoredLetter(record.offset, letter))
    return letters


def count_by_stream(letters: Iterable[StoredLetter]) -> Counter[str]:
    """How many dead letters each stream has."""
    return Counter(stored.letter.stream for stored in letters)


def lost_sessions(letters: Iterable[StoredLetter]) -> dict[str, Lost]:
    """The sessions the replayable dead letters stand for, by session id."""
    lost: dict[str, Lost] = {}
    for stored in letters:
        letter = stored.letter
        if letter.reason not in REPLAYABLE or letter.session_id is None:
            continue
        key = letter.session_key or ""
        entry = lost.setdefault(
            letter.session_id, Lost(letter.session_id, letter.stream, key, letter.reason)
        )
        if letter.payload == PAYLOAD_REFERENCE:
            entry.span = (letter.offset, letter.last_offset or letter.offset)
            entry.fragments = _referenced_count(letter)
            continue
        if letter.offset not in entry.offsets:
            entry.offsets.add(letter.offset)
            entry.fragments = len(entry.offsets)
        parts = _held(letter)
        if parts is not None:
            entry.held[letter.offset] = parts
    return lost


def read_fragments(
    reader: TopicReader,
    wanted: Sequence[Lost],
    excluded: Mapping[str, set[int]],
    progress: Progress,
) -> dict[str, dict[int, Parts]]:
    """Re-read from each stream the fragments the dead letters do not carry.

    For a referenced session, every fragment of its key within its span that is not
    itself a dead letter (`excluded`: late, future, other failures).
    """
    needs: dict[str, list[Lost]] = {}
    for lost in wanted:
        needs.setdefault(lost.stream, []).append(lost)
    found: dict[str, dict[int, Parts]] = {}
    for stream, items in sorted(needs.items()):
        offsets = {o for lost in items for o in lost.offsets if o not in lost.held}
        spans = [(lost.span, lost.key) for lost in items if lost.span is not None]
        bounds = [*offsets, *(s[0] for s, _ in spans), *(s[1] for s, _ in spans)]
        if not bounds:
            continue
        start, stop = min(bounds), max(bounds) + 1
        progress(f"re-reading {stream} offsets {start}..{stop - 1}")
        parts = found.setdefault(stream, {})
        for record in reader.read(stream, start, stop):
            offset = record.offset
            in_span = any(
                first <= offset <= last and record.key == key.encode()
                for (first, last), key in spans
            )
            if offset not in offsets and not (in_span and offset not in excluded.get(stream, ())):
                continue
            decoded = _decode(record.key, record.value, record.headers, record.timestamp)
            if decoded is not None:
                parts[offset] = decoded
    return found


def replay(
    processor_factory: Callable[[], StreamProcessor[Any]],
    lost: Lost,
    fragments: Mapping[int, Parts],
) -> FinishedSession | str:
    """Rebuild one lost session with a fixed processor: the session, or why it cannot be."""
    chosen = _fragments_of(lost, fragments)
    if isinstance(chosen, str):
        return chosen
    engine = SessionEngine(lost.stream, processor_factory())
    outputs: list[Any] = []
    for offset, (key, stamp, fields) in chosen:
        outputs += engine.process_fragment(offset, key, stamp, fields)
    last_offset, (_, last_stamp, _) = chosen[-1]
    outputs += engine.process_watermark(last_offset + 1, last_stamp, True)
    match = [o for o in outputs if isinstance(o, FinishedSession)]
    failed = [o for o in outputs if not isinstance(o, FinishedSession)]
    if failed:
        first = failed[0]
        return f"the processor still fails on it: {getattr(first, 'error', first)}"
    mine = [s for s in match if s.session_id == lost.session_id]
    if not mine or mine[0].fragments != lost.fragments:
        got = ", ".join(f"{s.session_id} ({s.fragments} fragments)" for s in match)
        return (
            f"the processor splits its {lost.fragments} fragments differently ({got}): its "
            "is_end, timestamp or timing changed; a replay is exact only for a fix of "
            "open, update or close"
        )
    return mine[0]


def _fragments_of(lost: Lost, fragments: Mapping[int, Parts]) -> list[tuple[int, Parts]] | str:
    """The session's fragments in offset order, or why they are not all available."""
    if lost.span is None:
        available = {**fragments, **lost.held}
        missing = sorted(o for o in lost.offsets if o not in available)
        if missing:
            return f"{len(missing)} of its fragments could not be read (first: offset {missing[0]})"
        return sorted((o, available[o]) for o in lost.offsets)
    first, last = lost.span
    chosen = sorted(
        (o, parts) for o, parts in fragments.items() if first <= o <= last and parts[0] == lost.key
    )
    if not chosen or chosen[0][0] != first:
        return f"its first fragment (offset {first}) could not be read from {lost.stream}"
    return chosen


def _held(letter: DeadLetter) -> Parts | None:
    """A dead letter's fragment from its own bytes, if it carries them."""
    if letter.payload == PAYLOAD_NONE or letter.timestamp_ms is None or not letter.value:
        return None
    return _decode(letter.key, letter.value, None, letter.timestamp_ms)


def _decode(key: Any, value: Any, headers: Any, stamp: Any) -> Parts | None:
    try:
        decoded = decode_parts(key, value, headers, stamp)
    except UndecodableRecord:
        return None
    return None if not isinstance(decoded, tuple) else decoded


def _referenced_count(letter: DeadLetter) -> int:
    try:
        return int(json.loads(letter.value or b"{}").get("fragments", 0))
    except (ValueError, TypeError, AttributeError):
        return 0


class DeadLetterCounts:
    """Dead letters per stream, from the dead-letter topic's headers, read incrementally.

    The first call reads the topic from its start; later ones (`status --watch`)
    only what was added since. None while Kafka cannot be read.
    """

    def __init__(self, bootstrap: str, app: str, properties: Mapping[str, str]) -> None:
        self._bootstrap, self._properties = bootstrap, properties
        self._topic = deadletter_topic(app)
        self._position = 0
        self._counts: Counter[str] = Counter()

    def counts(self) -> Counter[str] | None:
        """Dead letters per stream so far."""
        try:
            reader = TopicReader(self._bootstrap, self._properties)
        except ClientError:
            return None
        try:
            end = reader.end(self._topic)
            for record in reader.read(self._topic, self._position, end, timeout=30.0):
                stream = _header(record.headers, "stream")
                if stream is not None:
                    self._counts[stream] += 1
            self._position = max(self._position, end)
        except (ClientError, DeadLetterError):
            return None
        finally:
            reader.close()
        return self._counts


def _header(headers: Any, name: str) -> str | None:
    for key, value in headers or ():
        if key == name and isinstance(value, bytes):
            return value.decode("utf-8", "replace")
    return None
