"""One node over the in-memory parts with a handover store: the run the handover tests share."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from framework.node.node import Node
from framework.testkit.memory import MemoryLog, memory_parts, node_config
from sessionizer.examples.weblog import WebSessions
from sessionizer.records import FinishedSession
from sessionizer.sinks import MemorySink
from state.handover import HandoverStore
from state.store import VersionedMemory

__all__ = ["after_polls", "run_node", "session_ids"]


def run_node(
    log: MemoryLog,
    memory: VersionedMemory,
    store: HandoverStore | None,
    until: Callable[[], bool],
    processor: Any = None,
    **config: Any,
) -> tuple[Node, MemorySink]:
    """Run a node (`WebSessions` unless `processor`) until `until`; `config` overrides config."""
    sink = MemorySink()
    node_parts = replace(memory_parts(log, sink, memory, until), handover=store)
    node = Node(node_config(**config), processor=processor or WebSessions(), parts=node_parts)
    node.run()
    return node, sink


def after_polls(count: int) -> Callable[[], bool]:
    """An `until` that holds from its `count`-th call on: a node stopped mid-stream."""
    seen = {"n": 0}

    def enough() -> bool:
        seen["n"] += 1
        return seen["n"] >= count

    return enough


def session_ids(sessions: Iterable[FinishedSession]) -> list[str]:
    """The sessions' ids, sorted."""
    return sorted(session.session_id for session in sessions)
