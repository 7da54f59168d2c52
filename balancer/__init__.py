"""Streams claimed through ZooKeeper: membership, overflow balancing, fencing, release.

The owner (a consumer node, or `framework.member` in tests) drives one
`Balancer` from its loop with `poll()`, and is told about streams through a
`BalancerListener`.  See docs/balancing.md.
"""

from balancer.balancer import Balancer
from balancer.config import BalancerConfig, BalancerListener, NoopListener
from balancer.errors import (
    BalancerError,
    DuplicateConsumer,
    InvalidTransition,
    MembersDisagree,
    MembershipLost,
    StreamFenced,
)
from balancer.fencing import StreamLease
from balancer.machine import BalancerState

__all__ = [
    "Balancer",
    "BalancerConfig",
    "BalancerError",
    "BalancerListener",
    "BalancerState",
    "DuplicateConsumer",
    "InvalidTransition",
    "MembersDisagree",
    "MembershipLost",
    "NoopListener",
    "StreamFenced",
    "StreamLease",
]
