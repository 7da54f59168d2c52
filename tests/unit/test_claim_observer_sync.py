"""`ClaimObserver` reads the claims as ZooKeeper last acknowledged them, not as a lagging
server still holds them, and `ownership_violations` still catches every real one.

ZooKeeper serves a read from the server the session is connected to; a follower
applies a commit some time after the leader (and the member's own server)
acknowledged it, the more so right after an election.  Without a `sync` first, a
claim its member had already logged as assigned could read as missing: CI saw
"e2 held it while ZooKeeper said None" right after the ensemble's leader was killed.
The fake below is such a server: writes are acknowledged at once, applied only
when the session syncs.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from kazoo.exceptions import NoNodeError

from balancer.claims import encode
from framework.kernel.paths import AppPaths
from framework.processes import MemberProcess
from framework.testing.members import ClaimObserver, ownership_violations

PATHS = AppPaths("app")
STREAM = "app.stream.0000"


class _Result:
    def __init__(self, value: tuple[bytes, None] | None) -> None:
        self._value = value

    def get(self) -> tuple[bytes, None]:
        if self._value is None:
            raise NoNodeError()
        return self._value


class LaggingServer:
    """The observer's session: reads what this server has applied; `sync` catches it up."""

    def __init__(self) -> None:
        self.acknowledged: dict[str, bytes] = {}  # what the leader committed
        self.applied: dict[str, bytes] = {}

    def write(self, path: str, data: bytes, *, applied: bool = False) -> None:
        self.acknowledged[path] = data
        if applied:
            self.applied[path] = data

    def sync(self, _path: str) -> None:
        self.applied = dict(self.acknowledged)

    def get_children(self, path: str) -> list[str]:
        return sorted(p.rsplit("/", 1)[1] for p in self.applied if p.startswith(f"{path}/"))

    def get_async(self, path: str) -> _Result:
        data = self.applied.get(path)
        return _Result(None if data is None else (data, None))


def member(tmp_path: Path, node: str, *events: dict[str, Any]) -> MemberProcess:
    """A member whose log holds `events` (what `framework.testing.member` writes)."""
    log = tmp_path / f"{node}.log"
    log.write_text("".join(json.dumps(event) + "\n" for event in events))
    return MemberProcess(node, cast(Any, None), log)


def claim(server: LaggingServer, node: str, *, applied: bool = False) -> None:
    server.write(PATHS.claim(STREAM), encode({"consumer": node}), applied=applied)


def observed_after_e2_took(
    tmp_path: Path, server: LaggingServer
) -> tuple[ClaimObserver, list[str]]:
    """e2 logged STREAM as assigned a second before the observer's reading: that reading,
    and the violations found in it."""
    took = (datetime.now(UTC) - timedelta(seconds=1)).isoformat()
    e2 = member(tmp_path, "e2", {"event": "assigned", "streams": [STREAM], "timestamp": took})
    observer = ClaimObserver("zk", PATHS, [])
    observer._observe(cast(Any, server))
    return observer, ownership_violations({"e2": e2}, observer)


def test_a_claim_acknowledged_before_the_reading_is_in_it(tmp_path: Path) -> None:
    server = LaggingServer()
    claim(server, "e2")  # e2's take committed; the observer's server has not applied it yet
    observer, violations = observed_after_e2_took(tmp_path, server)
    assert violations == []
    assert observer.claims[-1][2] == {STREAM: "e2"}


def test_another_owner_is_still_a_violation(tmp_path: Path) -> None:
    server = LaggingServer()
    claim(server, "e3", applied=True)  # what ZooKeeper really says while e2 believes it holds it
    _, violations = observed_after_e2_took(tmp_path, server)
    assert violations == [f"{STREAM}: e2 held it while ZooKeeper said e3"]


def test_no_claim_at_all_is_still_a_violation(tmp_path: Path) -> None:
    _, violations = observed_after_e2_took(tmp_path, LaggingServer())
    assert violations == [f"{STREAM}: e2 held it while ZooKeeper said None"]


@pytest.mark.parametrize(("first", "then", "violations"), [(5, 7, 0), (5, 3, 1)])
def test_a_counter_going_back_is_still_a_violation(first: int, then: int, violations: int) -> None:
    server = LaggingServer()
    observer = ClaimObserver("zk", PATHS, [STREAM])
    for counter in (first, then):
        server.write(PATHS.stream_state(STREAM), encode({"counter": counter}), applied=True)
        observer._observe(cast(Any, server))
    assert len(observer.violations) == violations
