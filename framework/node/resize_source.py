"""A source stream's part in a live resize: its barrier, its migration, its stragglers.

docs/resize.md, "The protocol", steps 3 and 5.  Everything here is decided by the
stream's log (the producers' markers, their liveness) and by what the gate was told
when its task resumed, so a replay decides the same way and writes the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from framework.kernel.fragment import Fragment
from router.hashing import stream_for_key
from router.naming import stream_index, stream_name
from router.resize_wire import (
    Control,
    Epoch,
    Forward,
    ForwardEnd,
    ForwardSeal,
    MigrationDone,
    MigrationPart,
)
from sessionizer.engine import SessionEngine
from sessionizer.migration import (
    PLACE,
    TAKEN,
    Admission,
    Unmovable,
    export_session,
    session_codec,
)
from sessionizer.records import EngineOutput

__all__ = ["SourceCounts", "SourceRole"]


@dataclass
class SourceCounts:
    """What a source did in this owner's life (status and logs)."""

    sessions: int = 0
    """Sessions migrated (written, this life; a replay writes them again)."""
    fragments: int = 0
    """Raw fragments migrated with them."""
    unmovable: int = 0
    """Sessions whose object could not be dumped: closed on the source instead."""
    forwarded: int = 0
    """Stragglers forwarded to their new stream."""
    not_again: int = 0
    """Stragglers a previous owner had forwarded already (before its commit)."""
    moved_keys: dict[str, int] = field(default_factory=dict)
    """Sessions written per target."""


class SourceRole:
    """The barrier decision and the records a source writes (`emit` takes each)."""

    def __init__(
        self,
        stream: str,
        app: str,
        epoch: Epoch,
        engine: SessionEngine,
        emit: Callable[[Control, int], None],
        *,
        passed: int | None,
        resumed_from: int,
        start_time: int | None,
    ) -> None:
        self.stream, self.app, self.epoch = stream, app, epoch
        self.index = stream_index(stream, app=app)
        self.engine = engine
        self._emit = emit
        self.marked: set[str] = set()
        self.barrier: int | None = passed
        """Offset of the barrier, None while it is ahead."""
        self.start_time = start_time
        """Stream time at the epoch's first record: from there on, moving keys neither fold
        nor close here, so the target judges their held fragments against this time."""
        self.resumed_from = resumed_from
        self.committed = resumed_from
        self.counts = SourceCounts()
        self._moves: dict[str, int] = {}  # key -> its new stream index (or -1: it stays)
        self._unsealed: set[int] = set()  # targets forwarded to since the last seal

    @property
    def passed(self) -> bool:
        """The barrier is behind: moved keys' fragments are forwarded."""
        return self.barrier is not None

    def marker(self, producer: str | None) -> None:
        """A `resize` marker of this epoch: `producer` routes by the new count from here on."""
        if producer is not None:
            self.marked.add(producer)

    def keeps(self, key: str) -> bool:
        """Before the barrier, a moving key's sessions stay open and raw."""
        return self.barrier is None and self._move(key) >= 0

    def ready(self, live: set[str]) -> bool:
        """Every live named producer has marked (so none can send a moved key here again)."""
        return self.barrier is None and live <= self.marked

    def migrate(self, offset: int, *, ended: bool = False) -> list[EngineOutput]:
        """The barrier, at `offset`: write every moved key's open sessions, then the done
        markers (`ended`: the record at `offset` ends the input); return what closing
        unmovable sessions on the source finished."""
        self.barrier = offset
        per_target: dict[int, int] = dict.fromkeys(self.epoch.targets(), 0)
        outputs: list[EngineOutput] = []
        dump, _load = session_codec(self.engine.processor)
        for key in self.engine.open_keys():
            target = self._move(key)
            if target < 0:
                continue
            segments = self.engine.take_sessions(key)
            try:
                exported = [export_session(segment, dump) for segment in segments]
            except Unmovable:
                self.engine.restore_sessions(key, segments)
                outputs.extend(self.engine.close_keys([key]))
                self.counts.unmovable += len(segments)
                continue
            for segment, (head, raw) in zip(segments, exported, strict=True):
                parts = len(raw) + 1
                first = segment.first_offset
                self._part(target, key, (first, offset, 0, parts), head, segment.first_ts)
                for index, (member, stamp) in enumerate(raw, start=1):
                    self._part(target, key, (first, offset, index, parts), member, stamp)
                self.counts.fragments += len(raw)
            per_target[target] += len(segments)
            self.counts.sessions += len(segments)
        stamp = max(self.start_time or 0, 0)  # the targets' lateness reference
        for target, sessions in sorted(per_target.items()):
            done = MigrationDone(self.epoch, self.stream, offset, sessions, stamp, ended=ended)
            self._emit(done, target)
            self.counts.moved_keys[stream_name(self.app, target)] = sessions
        return outputs

    def admit(self, fragment: Fragment, reading: int) -> Admission:
        """After the barrier, a moved key's fragment is forwarded (a straggler); `reading` is
        the offset of the record being read (past the fragment's own when the fragment was
        parked as dated too far ahead: it is forwarded at the verdict)."""
        if self.barrier is None:
            return PLACE
        target = self._move(fragment.key)
        if target < 0:
            return PLACE
        if fragment.offset < self.barrier:
            return TAKEN  # a replay from before the barrier: its session moved at the barrier
        if reading < self.resumed_from:
            # A previous owner forwarded it and flushed before its commit.
            self.counts.not_again += 1
            return TAKEN  # neither placed nor sent again
        forward = Forward(
            self.epoch,
            self.stream,
            fragment.offset,
            # Never past the fragment itself: a parked one may come again after a commit.
            min(self.committed, fragment.offset),
            fragment.key,
            fragment.value,
            fragment.timestamp_ms,
        )
        self._emit(forward, target)
        self._unsealed.add(target)
        self.counts.forwarded += 1
        return TAKEN

    def forward_end(self, offset: int, timestamp_ms: int) -> None:
        """An end of input, after the barrier, of a producer not live here (it never routed
        by the new count): its stragglers' sessions on the targets end with it."""
        if self.barrier is None or offset < self.barrier or offset < self.resumed_from:
            return
        for target in self.epoch.targets():
            end = ForwardEnd(self.epoch, self.stream, offset, self.committed, timestamp_ms)
            self._emit(end, target)
            self._unsealed.add(target)

    def committed_at(self, offset: int, stream_time: int | None) -> None:
        """A commit stored `offset`: seal the targets forwarded to since the last seal."""
        self.committed = offset
        for target in sorted(self._unsealed):
            seal = ForwardSeal(self.epoch, self.stream, offset, max(stream_time or 0, 0))
            self._emit(seal, target)
        self._unsealed.clear()

    def seal_all(self) -> None:
        """On resuming past the barrier: a previous owner's forwards may await a seal."""
        self._unsealed.update(self.epoch.targets())

    def _part(
        self, target: int, key: str, place: tuple[int, int, int, int], body: Any, stamp: int
    ) -> None:
        """One migration record; `place` is (session's first offset, barrier, part, parts)."""
        first, barrier, part, parts = place
        record = MigrationPart(
            self.epoch, self.stream, barrier, key, first, part, parts, tuple(body), stamp
        )
        self._emit(record, target)

    def _move(self, key: str) -> int:
        target = self._moves.get(key)
        if target is None:
            if len(self._moves) >= 1 << 17:
                self._moves.clear()
            new = stream_for_key(key, self.epoch.new)
            target = self._moves[key] = -1 if new == self.index else new
        return target
