"""`sessionizer node` processes on this machine, and the conditions that say they settled.

`NodeGroup` runs nodes as child processes (the demo's, the tests' and the
benchmarks') and always reaps them; `claims_by_owner` and `balanced` read who
holds which stream from the claim znodes; `caught_up` and `settled` say when a
group has processed everything written so far.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from balancer import claims
from framework.cluster.netns import exec_prefix
from framework.kernel.config import ConnectionConfig
from framework.kernel.paths import AppPaths
from framework.processes import MemberProcess, ProcessGroup
from framework.progress import end_offsets, read_states
from router.naming import stream_name

__all__ = [
    "SESSIONIZER",
    "NodeGroup",
    "balanced",
    "caught_up",
    "claims_by_owner",
    "settled",
    "streams_of",
]

SESSIONIZER = str(Path(sys.executable).with_name("sessionizer"))
"""The `sessionizer` console script of the running interpreter's environment."""


def streams_of(app: str, count: int) -> list[str]:
    """The app's stream names."""
    return [stream_name(app, i) for i in range(count)]


class NodeGroup(ProcessGroup):
    """`sessionizer node` processes of one app; their structlog JSON goes to the logs."""

    def __init__(
        self,
        connection: ConnectionConfig,
        directory: Path,
        processor: str,
        *,
        session_timeout: float = 4.0,
    ) -> None:
        super().__init__(directory)
        self.connection = connection
        self.processor = processor
        self.session_timeout = session_timeout

    @property
    def nodes(self) -> dict[str, MemberProcess]:
        """The nodes started so far, by id."""
        return self.members

    def start(
        self,
        node: str,
        *extra: str,
        netns: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> MemberProcess:
        """Spawn node `node` (extra CLI flags may follow), inside network namespace `netns`,
        with `env` added to its environment (e.g. `SESSIONIZER_HOT_PATH`).

        With `netns` the node runs as `ip netns exec NETNS sessionizer node ...`
        (`ip` execs the node, so signals reach it directly).
        """
        command = self.command(node, *extra, netns=netns)
        return self.spawn(node, command, log_stderr=True, env=env, dumps_stacks=True)

    def command(self, node: str, *extra: str, netns: str | None = None) -> list[str]:
        """The command line `start` runs for node `node`."""
        return [
            *exec_prefix(netns), SESSIONIZER, "node", "--processor", self.processor, "--id", node,
            "--zk", self.connection.zk, "--bootstrap", self.connection.bootstrap,
            "--app", self.connection.app, "--session-timeout", str(self.session_timeout),
            *extra,
        ]  # fmt: skip


def claims_by_owner(client: KazooClient, paths: AppPaths) -> dict[str, set[str]]:
    """Streams per consumer id, as the claim znodes say."""
    owners: dict[str, set[str]] = {}
    for stream, data in claims.read_owners(client, paths).items():
        owners.setdefault(str(data.get("consumer")), set()).add(stream)
    return owners


def balanced(
    client: KazooClient,
    paths: AppPaths,
    members: Iterable[str],
    streams: int,
    spread: int | None = 1,
) -> dict[str, set[str]] | None:
    """The claims if every stream is claimed by one of `members` with at most `spread` streams
    between the most and the least loaded (None: any, as `--balance load` may leave), else None.

    None too while no member has created the layout yet (it is made by the first to start).
    """
    expected = set(members)
    try:
        owners = claims_by_owner(client, paths)
        consumers = set(client.get_children(paths.active_consumers))
    except NoNodeError:
        return None
    counts = [len(owners.get(m, ())) for m in expected]
    if set(owners) - expected or sum(counts) != streams:
        return None
    if spread is not None and max(counts) - min(counts) > spread:
        return None
    return owners if consumers == expected else None


def caught_up(client: KazooClient, connection: ConnectionConfig, streams: Iterable[str]) -> bool:
    """Every stream's last committed read position is its end offset."""
    streams = list(streams)
    states = read_states(client, connection.paths, streams)
    ends = end_offsets(connection.bootstrap, streams, connection.kafka_config)
    return all(states[s].committed_offset == ends[s] for s in streams)


def settled(
    client: KazooClient,
    connection: ConnectionConfig,
    members: Iterable[str],
    streams: list[str],
    spread: int | None = 1,
) -> bool:
    """Balanced among `members` (`balanced`'s `spread`, each stream owned once) and caught up."""
    try:
        owned = balanced(client, connection.paths, members, len(streams), spread)
    except NoNodeError:
        return False  # no node has created the layout yet
    return bool(owned) and caught_up(client, connection, streams)
