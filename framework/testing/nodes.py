"""Consumer nodes as separate processes, and the conditions tests and benchmarks wait for.

`NodeGroup` runs `sessionizer node` processes (and always reaps them);
`settled` says when a group is balanced and caught up (both from the product's
`framework.local_nodes`, which the demo uses, re-exported here); `StateObserver`
checks that no stream's stored offsets ever move backwards while faults happen.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Collection, Iterable
from typing import Any

from kafka.errors import KafkaError
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from balancer.claims import read_owners
from framework.kafka.errors import ClientError
from framework.kernel.config import ConnectionConfig
from framework.kernel.zookeeper import zookeeper_client
from framework.local_nodes import SESSIONIZER, NodeGroup, caught_up, settled, streams_of
from framework.progress import end_offsets, read_states

__all__ = [
    "SESSIONIZER",
    "NodeGroup",
    "StateObserver",
    "answering",
    "caught_up",
    "last_words",
    "node_story",
    "progress_lines",
    "settled",
    "settled_alive",
    "streams_of",
]


def last_words(group: NodeGroup, node: str, lines: int = 12) -> str:
    """A node's exit code and the end of its log, for a test's failure message."""
    member = group.nodes[node]
    tail = member.log_path.read_text(errors="replace").splitlines()[-lines:]
    return f"{node} exited {member.process.poll()}; its log ends:\n" + "\n".join(tail)


def settled_alive(
    client: KazooClient,
    connection: ConnectionConfig,
    group: NodeGroup,
    members: list[str],
    streams: list[str],
) -> bool:
    """`settled`, but fail at once (with its last log lines) when one of `members` has died."""
    running = group.running()
    dead = [n for n in members if n not in running]
    assert not dead, "a node died:\n" + "\n".join(last_words(group, n) for n in dead)
    try:
        return settled(client, connection, members, streams)
    except KazooException:
        return False  # the caller's own session, back from a paused server: look again


# Events that tell what a node did about its streams and servers (node_stats is noise here).
STORY_EVENTS = frozenset(
    {
        "node_started", "stream_resumed", "streams_lost", "session_lost", "stream_fenced",
        "zookeeper_suspended", "zookeeper_resumed", "sink_flush_failed", "sink_failed",
        "commit_failed", "poll_failed", "fetch_failed", "stream_load_failed", "node_crashed",
        "node_stopped", "loop_stalled", "loop_recovered",
    }
)  # fmt: skip


def node_story(group: NodeGroup, events: Collection[str] = STORY_EVENTS) -> str:
    """What each node logged of `events` (and every error), one line each, for failure reports."""
    lines = []
    for name, member in group.nodes.items():
        code = member.process.poll()
        lines.append(f"--- {name} ({'running' if code is None else f'exited {code}'})")
        for event in member.events():
            if event.get("event") in events or event.get("level") in ("error", "critical"):
                skipped = ("event", "node", "level", "stack")
                fields = {k: v for k, v in event.items() if k not in skipped}
                lines.append(f"{event['event']} {json.dumps(fields, default=str)[:300]}")
                # A stalled loop's innermost frames: the call it waits in.
                lines.extend(f"  | {f}" for f in str(event.get("stack", "")).splitlines()[-8:])
        if code is not None:  # what it printed last that is no event: its error line
            text = member.log_path.read_text(errors="replace").splitlines()
            lines.extend(f"  | {line}" for line in text[-40:] if not line.startswith("{"))
    return "\n".join(lines)


def progress_lines(client: KazooClient, connection: ConnectionConfig, streams: list[str]) -> str:
    """Each stream's owner, committed and end offset (a `settled` that timed out, explained)."""
    owners = {s: str(d.get("consumer")) for s, d in read_owners(client, connection.paths).items()}
    states = read_states(client, connection.paths, streams)
    ends = end_offsets(connection.bootstrap, streams, connection.kafka_config)
    members = sorted(client.get_children(connection.paths.active_consumers))
    lines = [f"members {members}"]
    for stream in streams:
        lines.append(
            f"{stream}: owner {owners.get(stream)} committed {states[stream].committed_offset}"
            f" end {ends.get(stream)}"
        )
    return "\n".join(lines)


def answering(
    group: NodeGroup,
    condition: Callable[[], Any],
    live: Callable[[], Iterable[str]] | None = None,
) -> Callable[[], Any]:
    """`condition`, read as false while a server does not answer this very moment.

    Fails at once when one of the `live` nodes (default: all of the group's) has
    exited on its own: waiting on would only time out.
    """

    def check() -> Any:
        names = group.nodes if live is None else live()
        dead = {n: code for n in names if (code := group.nodes[n].process.poll()) is not None}
        assert not dead, f"node(s) exited on their own: {dead}\n" + "\n".join(
            last_words(group, n) for n in dead
        )
        try:
            return condition()
        except (ClientError, KafkaError, KazooException):  # the layer's, or a raw client's
            return False

    return check


class StateObserver:
    """Reads every stream's stored state continuously; records any offset that goes backwards.

    A fenced-off owner writing over the new owner would show up here as a safe or
    committed offset moving back.  Use as a context manager.
    """

    def __init__(self, connection: ConnectionConfig, streams: list[str]) -> None:
        self.connection = connection
        self.streams = streams
        self.violations: list[str] = []
        self.snapshots = 0
        self._seen: dict[str, tuple[int, int]] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="state-observer", daemon=True)

    def __enter__(self) -> StateObserver:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        with zookeeper_client(
            self.connection.zk, auth=self.connection.zk_auth, timeout=30
        ) as client:
            while not self._done.wait(0.05):
                try:
                    states = read_states(client, self.connection.paths, self.streams)
                except KazooException:
                    continue  # a server killed on purpose: look again
                for stream, state in states.items():
                    now = (state.safe_offset, state.committed_offset)
                    before = self._seen.get(stream, (0, 0))
                    if now[0] < before[0] or now[1] < before[1]:
                        self.violations.append(f"{stream}: (safe, committed) {before} -> {now}")
                    self._seen[stream] = max(before, now)
                self.snapshots += 1
