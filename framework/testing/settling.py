"""`settle`: wait until a member group's claims are balanced and every member agrees."""

from __future__ import annotations

from collections.abc import Iterable

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from framework.kernel.paths import AppPaths
from framework.local_nodes import balanced
from framework.testing.members import MemberGroup, wait_for

__all__ = ["settle"]


def settle(
    group: MemberGroup,
    zk: KazooClient,
    paths: AppPaths,
    nodes: Iterable[str],
    streams: int,
    timeout: float = 45.0,
) -> dict[str, set[str]]:
    """Wait until `streams` streams are claimed over `nodes` (spread <= 1) and logs agree."""
    expected = sorted(nodes)

    def agreed() -> dict[str, set[str]] | None:
        try:
            owners = balanced(zk, paths, expected, streams)
        except KazooException:
            return None  # our own client is failing over too
        if owners is None:
            return None
        logs = {n: group.members[n].assignment() for n in expected}
        return owners if all(logs[n] == owners.get(n, set()) for n in expected) else None

    owners = wait_for(agreed, timeout, f"{expected} to settle on {streams} streams")
    assert owners is not None  # wait_for returns only what is truthy
    return owners
