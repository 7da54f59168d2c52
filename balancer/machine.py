"""The balancer's states, the transitions between them, and the events that drive them.

Like kazoo's `SetPartitioner`, the state is explicit and every change bumps a
`state_id`, so an owner can tell "still the same assignment round" cheaply.
Events are what kazoo callbacks put on the queue; only the owner's loop
applies them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import structlog

from balancer.errors import InvalidTransition

__all__ = [
    "BalancerState",
    "ClaimsChanged",
    "ConnectionChanged",
    "Event",
    "MembersChanged",
    "QuarantineChanged",
    "StateMachine",
]

log = structlog.get_logger(__name__)


class BalancerState(StrEnum):
    """Where a member is in its life."""

    STOPPED = "stopped"  # not started yet
    JOINING = "joining"  # connected, membership znode to (re)create
    BALANCING = "balancing"  # a balance pass is due
    STABLE = "stable"  # last pass done; waiting for events
    PAUSED = "paused"  # connection suspended: owner must not commit
    LOST = "lost"  # session expired: every stream dropped, waiting to reconnect
    DRAINING = "draining"  # left the group; releasing streams one at a time
    DRAINED = "drained"  # drain finished; nothing held
    CLOSED = "closed"  # released everything and disconnected


_S = BalancerState
_ANYTIME = {_S.PAUSED, _S.LOST, _S.CLOSED}  # reachable from every active state
_ALLOWED: dict[BalancerState, frozenset[BalancerState]] = {
    _S.STOPPED: frozenset({_S.JOINING, _S.CLOSED}),
    _S.JOINING: frozenset({_S.BALANCING, _S.DRAINING, *_ANYTIME}),
    _S.BALANCING: frozenset({_S.STABLE, _S.JOINING, _S.DRAINING, *_ANYTIME}),
    _S.STABLE: frozenset({_S.BALANCING, _S.JOINING, _S.DRAINING, *_ANYTIME}),
    _S.PAUSED: frozenset({_S.JOINING, _S.BALANCING, _S.DRAINING, _S.LOST, _S.CLOSED}),
    _S.LOST: frozenset({_S.JOINING, _S.DRAINED, _S.CLOSED}),
    _S.DRAINING: frozenset({_S.DRAINED, *_ANYTIME}),
    _S.DRAINED: frozenset({_S.CLOSED}),
    _S.CLOSED: frozenset(),
}


class StateMachine:
    """The current state, its id, and the transition check."""

    def __init__(self, node: str) -> None:
        self.node = node
        self.state = BalancerState.STOPPED
        self.state_id = 0

    def to(self, new: BalancerState) -> None:
        """Move to `new`; raise `InvalidTransition` if the table does not allow it."""
        if new is self.state:
            return
        if new not in _ALLOWED[self.state]:
            raise InvalidTransition(self.node, self.state, new)
        log.debug("balancer_state", node=self.node, old=str(self.state), new=str(new))
        self.state = new
        self.state_id += 1


@dataclass(frozen=True)
class ConnectionChanged:
    """kazoo reported a connection state (a `KazooState` value)."""

    state: str


@dataclass(frozen=True)
class MembersChanged:
    """The children of `active_consumers` changed."""

    members: tuple[str, ...]


@dataclass(frozen=True)
class ClaimsChanged:
    """The children of `claimed_streams` changed."""

    claimed: tuple[str, ...]


@dataclass(frozen=True)
class QuarantineChanged:
    """The children of `quarantined_streams` changed (a stream quarantined or reset)."""

    quarantined: tuple[str, ...]


@dataclass(frozen=True)
class StreamsChanged:
    """The children of `active_streams` changed (streams created, or a live resize grew the
    app): the new streams are shared out at once, not at the next periodic resync."""

    streams: tuple[str, ...]


Event = ConnectionChanged | MembersChanged | ClaimsChanged | QuarantineChanged | StreamsChanged
