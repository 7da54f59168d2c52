"""Errors raised by the balancer; all derive from `SessionizerError`."""

from __future__ import annotations

from collections.abc import Mapping

from framework.kernel.errors import ConfigError, MemberError, SessionizerError, StreamError

__all__ = [
    "BalancerError",
    "DuplicateConsumer",
    "InvalidTransition",
    "MembersDisagree",
    "MembershipLost",
    "StreamFenced",
]


def _who(node: str | None) -> str:
    return f"node {node}" if node else "this node"


class BalancerError(SessionizerError):
    """Base class of the errors raised by `balancer`."""


class StreamFenced(BalancerError, StreamError):
    """A fenced write found another epoch: someone else owns the stream now."""

    def __init__(
        self, stream: str, *, expected: int, node: str | None = None, gone: bool = False
    ) -> None:
        self.expected = expected
        self.node = node
        found = "its state record is gone" if gone else "its epoch has moved on"
        super().__init__(
            stream,
            f"{_who(node)} was fenced off (expected version {expected}, "
            f"{found}); another node has taken the stream. The node drops it without "
            "committing and rebalances; nothing to do unless this repeats, which points at "
            "long pauses (GC, swap, SIGSTOP) or a session timeout that is too short",
        )


class MembershipLost(BalancerError, MemberError):
    """The ZooKeeper session ended: every claim of this node is gone."""

    def __init__(self, node: str, detail: str = "") -> None:
        extra = f" ({detail})" if detail else ""
        super().__init__(
            node,
            f"node {node}: its ZooKeeper session is gone{extra}; its streams were dropped "
            "without committing and it rejoins when the connection returns. Check ZooKeeper "
            "and the network if this repeats",
        )


class DuplicateConsumer(BalancerError, MemberError, ConfigError):
    """Another live session already holds this consumer id (a `ConfigError`: the node refuses
    to run, rather than crashing)."""

    def __init__(self, node: str, path: str, waited: float) -> None:
        self.path = path
        super().__init__(
            node,
            f"node {node}: {path} has belonged to another live ZooKeeper session for "
            f"{waited:.0f} s; two nodes were started with the same --id. Stop one of them or "
            "give each node its own id",
        )


class MembersDisagree(BalancerError, MemberError, ConfigError):
    """Other members of the app run with a setting all must share set otherwise (a
    `ConfigError`: the node refuses to run, rather than crashing)."""

    def __init__(
        self, node: str, app: str, ours: Mapping[str, str], theirs: Mapping[str, Mapping[str, str]]
    ) -> None:
        self.theirs = {name: dict(members) for name, members in theirs.items()}
        differences = "; ".join(
            f"its {name} is {ours[name]}, but "
            + ", ".join(f"{m} runs {v}" for m, v in sorted(members.items()))
            for name, members in sorted(theirs.items())
        )
        super().__init__(
            node,
            f"node {node} left app {app} at its join: {differences}. Every node of an app "
            f"must run with the same {', '.join(sorted(theirs))}: start it with theirs, or "
            "stop them all before switching",
        )


class InvalidTransition(BalancerError):
    """A state change the balancer's state machine does not allow (a bug, not an outage)."""

    def __init__(self, node: str, current: str, wanted: str) -> None:
        super().__init__(
            f"node {node}: balancer cannot go from {current} to {wanted}; this is a bug in "
            "the balancer, please report it with the node's log"
        )
