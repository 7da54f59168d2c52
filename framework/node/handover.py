"""`NodeHandover`: a node's side of handovers on planned moves (docs/nodes.md, "Planned moves").

Giving (`give`, step 5 of `framework.node.checkpoint.Checkpoint.release`, after
the release's commit, for the streams whose engine is exactly at that commit):
each engine with something a replay would re-read is exported; all their records
are sent to the handover log and acknowledged together (one wait), then the
pointers of the acknowledged ones are written; the claims are released after.
Taking (`resume_many`, from `Node.on_assigned`, after the states are loaded; the
records of all the streams are fetched together): a record is used only if its
pointer matches the loaded epoch and committed offset, its bytes match the
pointer, and the restored engine agrees with the loaded state; then reading
starts at the committed offset.  Anything else replays from the safe offset, as
after a crash, with the reason logged and counted.  How each stream was resumed
is noted in its registration, the notes of one assignment together.  Everything
runs on the loop thread; a batch of reads shares one deadline, so assigning many
streams while Kafka is slow costs at most one.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from framework.node.metrics import HandoverMetrics
from framework.node.task import StreamTask
from sessionizer.engine import SessionEngine
from sessionizer.handover import HandoverUnavailable, export_engine, restore_engine
from sessionizer.processor import StreamProcessor
from state.errors import StateError
from state.handover import HandoverMissing, HandoverPointer, HandoverRecord, HandoverStore
from state.record import StreamState
from state.store import StateStore

__all__ = ["NodeHandover", "Resumption"]


@dataclass(frozen=True)
class Resumption:
    """How a stream is resumed: its task, whether a handover was used, and why not."""

    task: StreamTask
    handover: bool
    reason: str | None
    """Why no handover was used (None when one was)."""

    @property
    def replay(self) -> int:
        """Records the task re-reads before new ones (offsets are dense in a stream topic)."""
        return self.task.resumed_from - self.task.position


class NodeHandover:
    """Writes handovers on planned releases and uses them on assignment."""

    def __init__(
        self,
        store: HandoverStore | None,
        node: str,
        log: Any,
        metrics: HandoverMetrics | None,
        *,
        enabled: bool = True,
    ) -> None:
        self.store = store
        self.enabled = enabled
        """False (`--handover off`): never write nor use a record; every move replays."""
        self.node = node
        self.log = log
        self.metrics = metrics
        self.counts: Counter[str] = Counter()
        """Outcomes so far: written, used, or the reason a stream replayed."""
        self.replayed = 0
        """Records this node's resumed streams had to re-read."""
        self._warned = False
        self._deadline = 0.0

    # -- giving ------------------------------------------------------------------

    @property
    def writes(self) -> bool:
        """True if a planned release writes handovers (a store, and `--handover on`)."""
        return self.store is not None and self.enabled

    def give(self, tasks: Sequence[StreamTask], store: StateStore) -> None:
        """Hand over the tasks, each exactly at its last commit (the checkpoint's step 5).

        All the records are sent before any acknowledgement is awaited, and the pointers
        of the acknowledged ones are written together: one wait, one deadline per release.
        """
        if not self.writes:
            return
        # One deadline for the whole release: a shutdown stays bounded whatever Kafka does.
        self.start_batch()
        records: list[HandoverRecord] = []
        for task in tasks:
            version = store.version(task.stream)
            if version is None:
                continue  # not owned here any more: the next owner replays
            if task.committed.safe_offset >= task.committed.committed_offset:
                continue  # nothing to replay: the next owner needs no handover
            engine = self._export(task)
            if engine is not None:
                records.append(HandoverRecord(task.stream, version + 1, task.position, engine))
        if records:
            self._put(records)

    def _export(self, task: StreamTask) -> bytes | None:
        try:
            return export_engine(task.engine)
        except HandoverUnavailable as exc:
            self._count("undumpable")
            if not self._warned:  # once per node: it is the processor, not the stream
                self._warned = True
                self.log.warning("handover_unavailable", stream=task.stream, reason=exc.reason)
            return None

    def _put(self, records: list[HandoverRecord]) -> None:
        assert self.store is not None
        left = self._deadline - time.monotonic()
        if left <= 0:
            outcomes: dict[str, HandoverPointer | StateError] = {
                record.stream: StateError(f"stream {record.stream}: no time left for a handover")
                for record in records
            }
        else:
            outcomes = self.store.put_many(records, timeout=left)
        for record in records:
            outcome = outcomes[record.stream]
            if isinstance(outcome, StateError):
                self._count("write_failed")
                self.log.warning("handover_failed", stream=record.stream, error=str(outcome))
                continue
            self._count("written")
            self.log.info(
                "handover_written",
                stream=record.stream,
                epoch=record.epoch,
                committed_offset=record.committed_offset,
                bytes=outcome.size,
                record_offset=outcome.offset,
            )

    # -- taking ------------------------------------------------------------------

    def start_batch(self) -> None:
        """Start the deadline the reads of one assignment (or the writes of a release) share."""
        timeout = self.store.timeout if self.store is not None else 0.0
        self._deadline = time.monotonic() + timeout

    def resume_many(
        self, processor: StreamProcessor[Any], loaded: Sequence[tuple[StreamState, int]]
    ) -> dict[str, Resumption]:
        """The tasks for the streams of one assignment, each just loaded at its epoch: from
        its handover if it has a good one, else by replay.  The handovers are fetched
        together (`HandoverStore.fetch_many`), and how each stream was resumed is noted in
        one go (`sessionizer status` shows it)."""
        self.start_batch()
        fetched = self._fetch(loaded)
        resumptions: dict[str, Resumption] = {}
        for state, epoch in loaded:
            resumption = self._resume(processor, state, fetched.get(state.stream))
            replay = resumption.replay
            self.replayed += replay
            self._count("used" if resumption.handover else _outcome(resumption.reason), replay)
            self.log.info(
                "stream_resumed",
                stream=state.stream,
                epoch=epoch,
                offset=resumption.task.position,
                committed_offset=state.committed_offset,
                safe_offset=state.safe_offset,
                ignored=len(state.ignore),
                handover=resumption.handover,
                replay=replay,
                reason=resumption.reason,
            )
            resumptions[state.stream] = resumption
        self._note(resumptions)
        return resumptions

    def _why_not(self, state: StreamState) -> str | None:
        """Why the stream is resumed without looking for a handover (None: it looks)."""
        if self.store is None:
            return "disabled: no handover store"
        if not self.enabled:
            return "disabled: --handover off"
        if state.safe_offset >= state.committed_offset:
            return "none needed: nothing to replay"
        return None

    def _fetch(
        self, loaded: Sequence[tuple[StreamState, int]]
    ) -> dict[str, HandoverRecord | HandoverMissing]:
        """The handover of every stream that looks for one, fetched together by the deadline."""
        wanted = {
            state.stream: (epoch, state.committed_offset)
            for state, epoch in loaded
            if self._why_not(state) is None
        }
        left = self._deadline - time.monotonic()
        if self.store is None or not wanted or left <= 0:
            return {}  # none wanted, or no time left: those wanted replay
        return self.store.fetch_many(wanted, timeout=left)

    def _resume(
        self,
        processor: StreamProcessor[Any],
        state: StreamState,
        fetched: HandoverRecord | HandoverMissing | None,
    ) -> Resumption:
        reason = self._why_not(state)
        if reason is None:
            restored = self._restored(processor, state, fetched)
            if not isinstance(restored, str):
                position = state.committed_offset
                task = StreamTask(state.stream, restored, position=position, committed=state)
                return Resumption(task, True, None)
            reason = restored
        return Resumption(StreamTask.resume(processor, state), False, reason)

    def _restored(
        self,
        processor: StreamProcessor[Any],
        state: StreamState,
        fetched: HandoverRecord | HandoverMissing | None,
    ) -> SessionEngine | str:
        """The engine from the stream's fetched handover, or why there is none to use."""
        if fetched is None:
            return "timeout: this assignment's handover reads took too long"
        if isinstance(fetched, HandoverMissing):
            return f"{fetched.reason}: {fetched.detail}"
        try:
            return restore_engine(processor, state, fetched.engine)
        except HandoverMissing as exc:
            return f"{exc.reason}: {exc.detail}"
        except HandoverUnavailable as exc:
            return f"refused: {exc.reason}"

    def _note(self, resumptions: Mapping[str, Resumption]) -> None:
        """Write how each stream was resumed; a note not written is logged, nothing else."""
        if self.store is None or not resumptions:
            return
        notes = {
            stream: {"node": self.node, "handover": r.handover, "replayed": r.replay}
            for stream, r in resumptions.items()
        }
        outcomes = self.store.pointers.resumed_many(notes, self.store.timeout)
        for stream, error in outcomes.items():
            if error is not None:
                self.log.warning("resume_note_failed", stream=stream, error=str(error))

    def _count(self, outcome: str, replayed: int = 0) -> None:
        self.counts[outcome] += 1
        if self.metrics is not None:
            self.metrics.count(self.node, outcome, replayed)


def _outcome(reason: str | None) -> str:
    """The metric label of a reason: its first word (missing, stale, corrupt, refused, ...)."""
    return (reason or "unknown").split(":", 1)[0].replace(" ", "_")
