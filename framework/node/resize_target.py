"""A target stream's part in a live resize: hold back, restore, continue, settle.

docs/resize.md, "The protocol", step 4, and "Invariants".  A fragment whose key
moved here from a source whose `migration-done` marker this stream has not read is
held back; at that marker the source's migrated sessions are restored (each part
once) and the held fragments placed after them, in (event time, offset) order.  The
stream is *settled* once every awaited done marker is read and every session that
holds a held or migrated fragment has finished; until then the gate holds the safe
offset at the epoch's first record, so a replay meets the whole epoch again.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from framework.kernel.fragment import Fragment
from router.hashing import stream_for_key
from router.naming import stream_index, stream_name
from router.resize_wire import Epoch, Forward, ForwardEnd, MigrationDone, MigrationPart
from sessionizer.engine import SessionEngine
from sessionizer.migration import (
    HELD,
    LATE,
    PLACE,
    Admission,
    Origin,
    restore_session,
    session_codec,
)
from sessionizer.records import EngineOutput, LateFragment
from sessionizer.segment import Segment

__all__ = ["ForwardFilter", "TargetCounts", "TargetRole"]

Held = tuple[Fragment, int, int | None]
"""A held-back fragment: itself, its event time, the stream time before it was read."""
Part = tuple[tuple[Any, ...], int, int, int | None]
"""A migration part as received: (body, record timestamp, offset here, stream time before)."""


@dataclass
class TargetCounts:
    """What a target did in this owner's life (status and logs)."""

    held: int = 0
    """Fragments held back until their source's done marker."""
    sessions: int = 0
    """Migrated sessions restored."""
    late: int = 0
    """Held or forwarded fragments dated before their key's migrated folded part."""
    duplicates: int = 0
    """Migration records, done markers and forwards recognised as written before."""


class TargetRole:
    """Hold-back, restore and settle of one target stream for one epoch."""

    def __init__(
        self, stream: str, app: str, epoch: Epoch, engine: SessionEngine, *, settled: bool
    ) -> None:
        self.stream, self.epoch, self.engine = stream, epoch, engine
        self.index = stream_index(stream, app=app)
        self.names = {i: stream_name(app, i) for i in epoch.sources()}
        self._sources = frozenset(self.names.values())
        self.settled = settled
        self.done: dict[str, int] = {}
        self.counts = TargetCounts()
        self._held: dict[str, list[Held]] = {}
        # (source, key, session's first offset there) -> (parts declared, parts received)
        self._parts: dict[tuple[str, str, int], tuple[int, dict[int, Part]]] = {}
        self._origins: dict[str, tuple[str, dict[int, tuple[int, int]]]] = {}
        self._tails: dict[str, int] = {}  # key -> latest folded event time it brought
        self._keys: set[str] = set()  # keys with a held or migrated fragment
        self._pending: set[str] | None = None  # set once every done marker is in
        self._finished: set[str] = set()  # pending keys that finished a session since
        self._last_done = -1
        self._old: dict[str, int] = {}
        self.ended = False

    @property
    def waiting(self) -> int:
        """Fragments held back now."""
        return sum(len(held) for held in self._held.values())

    def admit(self, fragment: Fragment, event_time: int, before: int | None) -> Admission:
        """Hold back a moved key's fragment until its source's done marker."""
        key = fragment.key
        old = self._old.get(key)
        if old is None:
            if len(self._old) >= 1 << 17:
                self._old.clear()
            old = self._old[key] = stream_for_key(key, self.epoch.old)
        if old != self.index:
            source = self.names.get(old)
            if source is not None and source not in self.done:
                self._held.setdefault(source, []).append((fragment, event_time, before))
                self.counts.held += 1
                return HELD
        tail = self._tails.get(key)
        return LATE if tail is not None and event_time < tail else PLACE

    def part(self, record: MigrationPart, before: int | None) -> None:
        """Keep one migration part until its source's done marker (each part once)."""
        if self._stale(record.source):
            return
        _total, slot = self._parts.setdefault(
            (record.source, record.key, record.session), (record.parts, {})
        )
        if record.part in slot:
            self.counts.duplicates += 1
            return
        assert record.offset is not None
        slot[record.part] = (record.body, record.timestamp_ms, record.offset, before)

    def done_marker(self, record: MigrationDone) -> list[EngineOutput]:
        """Restore the source's sessions, then place its keys' held fragments."""
        source = record.source
        if self._stale(source):
            return []
        assert record.offset is not None
        self.done[source] = self._last_done = record.offset
        restored = self._restore(source)
        # The source's fold line when its epoch started (from then on its moving keys neither
        # folded nor closed there): a held fragment behind it would have been late there.
        line = record.timestamp_ms - self.engine.timing.grace_ms
        released, outputs = self._release(source, line)
        outputs += self.engine.catch_up()
        if self.ended:  # the input ended before they came: as if M, it closes them too
            outputs += self.engine.close_keys(sorted(restored | released))
        elif record.ended and not self.engine.live_producers():
            # The source's last producer ended there without routing here: as if M, its
            # end of input would have ended this stream's too (no producer is live here).
            outputs += self.engine.close_keys(self.engine.open_keys())
        if self._sources <= set(self.done):
            self._pending = {key for key in self._keys if self.engine.first_offsets(key)}
        return outputs

    @property
    def due(self) -> bool:
        """A session that held the stream unsettled finished: `settle` may now succeed."""
        return bool(self._finished)

    def identify(self, key: str, segment: Segment) -> Origin | None:
        """The source identity of a finishing session that holds migrated fragments."""
        if self._pending is not None and key in self._pending:
            self._finished.add(key)
        known = self._origins.get(key)
        if known is None:
            return None
        source, origin = known
        offsets = [member[1] for member in segment.raw]
        offsets += segment.folded_offsets()
        spans = [origin[offset] for offset in set(offsets) if offset in origin]
        if not spans:
            return None
        return source, min(low for low, _ in spans), max(high for _, high in spans)

    def settle(self) -> bool:
        """True once settled: every done marker in, every epoch session finished."""
        if self.settled:
            return True
        pending = self._pending
        if pending is None:
            return False
        for key in self._finished:
            if all(first > self._last_done for first in self.engine.first_offsets(key)):
                pending.discard(key)
        self._finished.clear()
        if pending:
            return False
        self.settled = True
        self._origins.clear()
        self._tails.clear()
        self._keys.clear()
        self._parts.clear()
        self._old.clear()
        return True

    def _stale(self, source: str) -> bool:
        """A record of a settled epoch, or of a source already done here: a duplicate."""
        if self.settled or source in self.done or source not in self._sources:
            self.counts.duplicates += 1
            return True
        return False

    def _restore(self, source: str) -> set[str]:
        """Restore every migrated session of `source`, key by key; return the keys."""
        sessions: dict[str, list[tuple[int, int, Segment]]] = {}
        origins: dict[str, dict[int, tuple[int, int]]] = {}
        _dump, load = session_codec(self.engine.processor)
        for (from_stream, key, first), (total, parts) in sorted(self._parts.items()):
            if from_stream != source or any(index not in parts for index in range(total)):
                continue  # (incomplete cannot be: one writer wrote them all before its marker)
            restored = self._rebuild(key, parts[0], [parts[i] for i in range(1, total)], load)
            if restored is None:
                continue
            segment, origin = restored
            sessions.setdefault(key, []).append((segment.first_ts, first, segment))
            origins.setdefault(key, {}).update(origin)
        for key in sorted(sessions):
            segments = [segment for _, _, segment in sorted(sessions[key], key=lambda s: s[:2])]
            self.engine.restore_sessions(key, segments)
            self._origins[key] = (source, origins[key])
            self._keys.add(key)
            self.counts.sessions += len(segments)
        self._parts = {k: v for k, v in self._parts.items() if k[0] != source}
        return set(sessions)

    def _rebuild(
        self, key: str, head: Part, members: list[Part], load: Any
    ) -> tuple[Segment, dict[int, tuple[int, int]]] | None:
        """One migrated session without what a replay must skip, and its parts' origins.

        A part the resumed ignore list covers belongs to a session that finished here
        before the commit this owner resumed from (a held END may have split the migrated
        session: its later parts then live on in a session still open).
        """
        body, _stamp, offset, _before = head
        if body[1]:  # a fragment of the key dated before its folded part is late, skipped or not
            self._tails[key] = max(self._tails.get(key, body[2]), body[2])
        folded = bool(body[1]) and not self.engine.skips(key, offset, body[0])
        members = [m for m in members if not self.engine.skips(key, m[2], m[0][0])]
        if not folded and not members:
            return None
        if not folded:
            head = ((*body[:1], 0, *body[2:6], None, None), *head[1:])
        origin = {m[2]: (m[0][1], m[0][1]) for m in members}
        if folded:
            origin[offset] = (body[4], body[5])
        return _segment(key, head, members, load), origin

    def _release(self, source: str, line: int) -> tuple[set[str], list[EngineOutput]]:
        """Place the held fragments of `source`'s keys, key by key, in (event time, offset);
        return the keys and what placing them finished or refused."""
        outputs: list[EngineOutput] = []
        by_key: dict[str, list[Held]] = {}
        for held in self._held.pop(source, []):
            by_key.setdefault(held[0].key, []).append(held)
        for key in sorted(by_key):
            self._keys.add(key)
            ordered = sorted(by_key[key], key=lambda h: (h[1], h[0].offset))
            for fragment, event_time, before in (h for h in ordered if h[1] < line):
                reason = f"it is behind {source}'s fold line when the resize started ({line} ms)"
                outputs.append(LateFragment(fragment, event_time, before or event_time, reason))
                self.counts.late += 1
            keep = [h for h in ordered if h[1] >= line]
            outputs += self.engine.place_held(key, keep)
        return set(by_key), outputs


class ForwardFilter:
    """Applies each source's forwarded fragments once, in increasing source offset.

    A source never forwards again what it forwarded before its last commit (it starts
    from the committed offset it resumed from), and says how far it committed (each
    forward's `committed`, and `forward-seal` records).  So only forwards at or past
    a source's latest committed offset can come again: the target holds its safe
    offset at each of those it applied, and a replay rebuilds this filter.  A repeat
    it dropped lies between the forward and the seal that lets go of it: the hold
    then lasts until nothing else holds the safe offset at or before the repeat, so
    that no replay starts between the two and applies the repeat afresh.
    """

    def __init__(self) -> None:
        self._last: dict[str, int] = {}
        self._floor: dict[str, int] = {}
        self._holding: dict[str, deque[tuple[int, int]]] = {}
        self._repeated: dict[str, int] = {}  # source -> offset here of its latest dropped repeat

    def forward(self, record: Forward | ForwardEnd) -> tuple[bool, list[tuple[int, int | None]]]:
        """(apply it?, holds to let go: (offset here, repeat it must outlast or None)); hold
        `record.offset` if applied (the caller holds it)."""
        source = record.source
        released = self.seal(source, record.committed)
        assert record.offset is not None
        if record.source_offset <= self._last.get(source, -1):
            self._repeated[source] = record.offset
            return False, released
        self._last[source] = record.source_offset
        self._holding.setdefault(source, deque()).append((record.source_offset, record.offset))
        return True, released

    def seal(self, source: str, committed: int) -> list[tuple[int, int | None]]:
        """`source` committed past `committed`: stop holding what it cannot repeat."""
        if committed <= self._floor.get(source, -1):
            return []
        self._floor[source] = committed
        held, released = self._holding.get(source, deque()), []
        repeat = self._repeated.get(source)
        while held and held[0][0] < committed:
            offset = held.popleft()[1]
            released.append((offset, repeat if repeat is not None and repeat > offset else None))
        return released


def _segment(key: str, head: Part, members: list[Part], load: Any) -> Segment:
    """A migrated session here; one whose object cannot be loaded fails as a hook would."""
    body, _stamp, offset, before = head
    raw = [(m[0], m[1], m[2], m[3]) for m in members]
    try:
        return restore_session(key, body, (offset, before), raw, load)
    except Exception as exc:  # the user's load_session: the session goes to the dead letters
        failed = (*body[:6], None, ["load_session", f"{type(exc).__name__}: {exc}", None])
        return restore_session(key, failed, (offset, before), raw, load)
