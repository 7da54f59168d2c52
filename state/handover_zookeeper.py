"""`ZooKeeperPointers`: a stream's handover pointer, beside its registration in ZooKeeper.

The pointer is key `"handover"` of the JSON data of `active_streams/<stream>`
(DESIGN section 4: "topic, created; later: last owner, handover pointer"), and
key `"resumed"` says how the stream was last resumed (node, handover used or
not, records replayed).  A write is a version-checked read-modify-write, so the
registration's other fields are kept.  The pointers of one release, and the notes
of one assignment, are written together: their registrations are read in one
pipelined round trip, then set in one version-checked multi-operation (per
`BATCH_WRITES`); only a stream whose registration changed meanwhile costs a write
of its own.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kazoo.exceptions import BadVersionError, KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from framework.kernel.safe_json import loads_object
from state.errors import StateError, caused_by
from state.handover import HandoverPointer
from state.store import BATCH_WRITES
from state.zookeeper_store import StreamZnodes, all_written

__all__ = ["ZooKeeperPointers"]

_ATTEMPTS: Final = 5


@dataclass(frozen=True)
class _Field:
    """A key of the registration's JSON that `_update_many` sets, and how its failure reads."""

    name: str
    what: str
    consequence: str


_HANDOVER: Final = _Field("handover", "handover pointer", "the next owner replays")
_RESUMED: Final = _Field("resumed", "resume note", "`sessionizer status` shows the previous one")


class ZooKeeperPointers(StreamZnodes):
    """Handover pointers in the data of `<parent>/<stream>` (the `active_streams` znodes)."""

    def write(self, stream: str, pointer: HandoverPointer) -> None:
        """Store the pointer in the stream's registration; `StateError` if that fails."""
        self._update(stream, _HANDOVER.name, pointer.to_json())

    def write_many(
        self, pointers: Mapping[str, HandoverPointer], timeout: float
    ) -> dict[str, StateError | None]:
        """Store the pointers in few round trips, within `timeout`; the outcome per stream."""
        values = {stream: pointer.to_json() for stream, pointer in pointers.items()}
        return self._update_many(_HANDOVER, values, timeout)

    def resumed_many(
        self, notes: Mapping[str, dict[str, Any]], timeout: float
    ) -> dict[str, StateError | None]:
        """Record how each stream was last resumed (key `"resumed"`, for `sessionizer status`),
        in few round trips, within `timeout`; the outcome per stream."""
        return self._update_many(_RESUMED, notes, timeout)

    def _update_many(
        self, field: _Field, values: Mapping[str, Any], timeout: float
    ) -> dict[str, StateError | None]:
        """Set `field.name` in each stream's registration: the registrations read in one
        pipelined round trip, then set in version-checked multi-operations."""
        deadline = time.monotonic() + timeout
        outcomes: dict[str, StateError | None] = {}
        sets: list[tuple[str, bytes, int]] = []
        try:
            reads = {stream: self.client.get_async(self.path(stream)) for stream in values}
            for stream, pending in reads.items():
                try:
                    data, stat = pending.get(timeout=max(0.0, deadline - time.monotonic()))
                except NoNodeError:
                    outcomes[stream] = _unregistered(stream, self.parent)
                    continue
                fields = _fields(data)
                fields[field.name] = values[stream]
                sets.append((stream, json.dumps(fields).encode(), int(stat.version)))
            for start in range(0, len(sets), BATCH_WRITES):
                batch = sets[start : start + BATCH_WRITES]
                if self._set_all(batch, deadline):
                    outcomes.update((stream, None) for stream, _, _ in batch)
                    continue
                for stream, _, _ in batch:  # a registration changed meanwhile: one by one
                    outcomes[stream] = self._write_alone(stream, field, values[stream], deadline)
        except (KazooException, KazooTimeoutError) as exc:
            for stream in values.keys() - outcomes.keys():
                outcomes[stream] = StateError(
                    f"stream {stream}: {field.what} not written ({exc!r}); {field.consequence}"
                )
        return outcomes

    def _set_all(self, batch: list[tuple[str, bytes, int]], deadline: float) -> bool:
        """One all-or-nothing multi-operation; False if a version moved (nothing written)."""
        pending = self.versioned_sets(batch).commit_async()
        return all_written(pending.get(timeout=max(0.0, deadline - time.monotonic())))

    def _write_alone(
        self, stream: str, field: _Field, value: Any, deadline: float
    ) -> StateError | None:
        if time.monotonic() >= deadline:
            return StateError(f"stream {stream}: {field.what} not written, no time left")
        try:
            self._update(stream, field.name, value)
        except StateError as exc:
            return exc
        return None

    def _update(self, stream: str, name: str, value: Any) -> None:
        path = self.path(stream)
        try:
            for _ in range(_ATTEMPTS):
                data, stat = self.client.get(path)
                fields = _fields(data)
                fields[name] = value
                try:
                    self.client.set(path, json.dumps(fields).encode(), version=stat.version)
                    return
                except BadVersionError:
                    continue  # someone rewrote the registration meanwhile: read it again
        except NoNodeError as exc:
            raise _unregistered(stream, self.parent) from exc
        except KazooException as exc:
            raise StateError(f"stream {stream}: {name} not written ({exc!r})") from exc
        raise StateError(f"stream {stream}: its registration kept changing; {name} not written")

    def read(self, stream: str) -> HandoverPointer | None:
        """The stream's pointer (None if there is none); `StateError` if ZooKeeper fails."""
        pointer = self.read_many([stream])[stream]
        if isinstance(pointer, StateError):
            raise pointer
        return pointer

    def read_many(self, streams: Sequence[str]) -> dict[str, HandoverPointer | StateError | None]:
        """Each stream's pointer (None if there is none), or the `StateError` why ZooKeeper
        did not give it: the registrations read in one pipelined round trip."""
        pending = [(stream, self.client.get_async(self.path(stream))) for stream in streams]
        pointers: dict[str, HandoverPointer | StateError | None] = {}
        for stream, result in pending:
            try:
                data, _ = result.get()
            except NoNodeError:
                pointers[stream] = None
                continue
            except KazooException as exc:
                unreadable = StateError(f"stream {stream}: handover pointer unreadable ({exc!r})")
                pointers[stream] = caused_by(unreadable, exc)
                continue
            pointers[stream] = HandoverPointer.from_json(_fields(data).get(_HANDOVER.name))
        return pointers


def _unregistered(stream: str, parent: str) -> StateError:
    return StateError(f"stream {stream}: not registered under {parent}")


def _fields(data: bytes | None) -> dict[str, Any]:
    """The registration's JSON object (an empty one if it has none, or it is not one within
    `framework.kernel.safe_json`'s bounds: never raises, whatever the znode holds)."""
    value = loads_object(data)
    return {} if value is None else value
