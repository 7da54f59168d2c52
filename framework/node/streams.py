"""`OwnedStreams`: the tasks a node owns now, and where its record source reads them from."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from framework.node.ports import RecordSource
from framework.node.stats import NodeStats
from framework.node.task import StreamTask

__all__ = ["OwnedStreams"]


class OwnedStreams:
    """The owned streams' tasks (shared with the node), dropped and re-sought on the loop thread."""

    def __init__(
        self,
        tasks: dict[str, StreamTask],
        source: RecordSource,
        stats: NodeStats,
        held: Callable[[StreamTask], bool],
    ) -> None:
        self.tasks = tasks
        """The node's own dict: replaced tasks (a rewind) are seen by every reader at once."""
        self._source = source
        self._stats = stats
        self._held = held

    def drop(self, streams: Sequence[str], *, reassign: bool = True) -> None:
        """Forget the streams (keeping their counts), then re-seek the rest unless told not to."""
        for stream in streams:
            task = self.tasks.pop(stream, None)
            if task is not None:
                self._stats.retire(task)
        if reassign:
            self.reassign()

    def reassign(self) -> None:
        """Read every owned stream from its task's position; held streams wait."""
        # Every owned stream is re-sought, so fetched-but-unprocessed records of a stream
        # kept across the reassignment are simply fetched again.
        self._source.assign({s: t.position for s, t in self.tasks.items() if not self._held(t)})
