"""Balancer convergence: how long a group takes to settle after an event, and how many streams move.

    .venv/bin/python -m benchmarks.balancer_convergence [--members 10] [--streams 64]
        [--session-timeout 4] [--repeat 3]

Members are real `framework.testing.member` processes against real ZooKeeper
(`SESSIONIZER_ZK`, else a one-server `LocalCluster` started for the run).
Events, in order, each timed from the moment it is triggered until ZooKeeper
shows every stream claimed by the expected members with a spread <= 1:

- start: all members spawned together (includes interpreter start-up; the
  `after join` column times from the last member's `joined` log line instead);
- join: one more member spawned;
- sigterm: one member asked to leave (it commits, then releases everything);
- kill9: one member killed; its streams wait for its session to expire.

`moved` counts streams whose owner differs between the settled states before
and after (`minimum` is what any balancer must move); `takes` counts every
successful claim in between, so `takes - moved` is transient churn.
Prints a table and writes JSON to benchmarks/out/balancer_convergence.json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from kazoo.client import KazooClient

from framework.cluster import LocalCluster
from framework.kernel.paths import AppPaths
from framework.testing.members import MemberGroup, balanced, provision_streams, stream_names

__all__ = ["main"]

OUT = Path(__file__).resolve().parent / "out" / "balancer_convergence.json"
_POLL = 0.01  # how often convergence is checked; bounds the timing resolution
_TIMEOUT = 120.0


@dataclass(frozen=True)
class Measured:
    """One event of one run."""

    event: str
    members: int
    seconds: float
    after_join: float | None  # from the last spawned member's "joined" line (no start-up)
    moved: int
    minimum: int
    takes: int


def _owners(by_member: dict[str, set[str]]) -> dict[str, str]:
    return {stream: member for member, streams in by_member.items() for stream in streams}


def _settle(client: KazooClient, paths: AppPaths, members: list[str], streams: int) -> float:
    """Seconds until ZooKeeper is balanced over `members` (timed from the call)."""
    started = time.monotonic()
    while balanced(client, paths, members, streams) is None:
        if time.monotonic() - started > _TIMEOUT:
            raise TimeoutError(f"no convergence over {members} within {_TIMEOUT:.0f} s")
        time.sleep(_POLL)
    return time.monotonic() - started


def _takes(group: MemberGroup, since: float) -> int:
    return sum(
        len(e["streams"])
        for member in group.members.values()
        for e in member.events("assigned")
        if _wall(e["timestamp"]) >= since
    )


def _wall(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp).timestamp()


class _Run:
    """One run of the four events against a fresh app."""

    def __init__(self, client: KazooClient, group: MemberGroup, streams: int) -> None:
        self.client = client
        self.group = group
        self.paths = AppPaths(group.app)
        self.streams = streams
        self.members: list[str] = []
        self.owners: dict[str, str] = {}
        self.results: list[Measured] = []

    def event(
        self, name: str, trigger: Callable[[], None], minimum: int, spawned: Sequence[str] = ()
    ) -> None:
        since = time.time()
        trigger()
        seconds = _settle(self.client, self.paths, self.members, self.streams)
        settled = time.time()
        joined = [_wall(self.group.members[m].events("joined")[-1]["timestamp"]) for m in spawned]
        after_join = round(settled - max(joined), 3) if joined else None
        after = _owners(balanced(self.client, self.paths, self.members, self.streams) or {})
        moved = sum(1 for s, owner in after.items() if self.owners.get(s) != owner)
        self.owners = after
        takes = _takes(self.group, since)
        self.results.append(
            Measured(name, len(self.members), round(seconds, 3), after_join, moved, minimum, takes)
        )

    def held_by(self, member: str) -> int:
        return sum(1 for owner in self.owners.values() if owner == member)

    def run(self, count: int) -> list[Measured]:
        self.members = [f"n{i:02d}" for i in range(count)]
        start = list(self.members)
        self.event("start", lambda: [self.group.start(m) for m in start], self.streams, start)
        self.members.append("joiner")
        minimum = self.streams // len(self.members)
        self.event("join", lambda: self.group.start("joiner"), minimum, ["joiner"])
        leaver = self.members.pop(0)
        sigterm = self.group.members[leaver]
        self.event("sigterm", lambda: sigterm.send(signal.SIGTERM), self.held_by(leaver))
        victim = self.members.pop(0)
        killed = self.group.members[victim]
        self.event("kill9", lambda: killed.send(signal.SIGKILL), self.held_by(victim))
        return self.results


def _one_run(zk: str, args: argparse.Namespace, directory: Path) -> list[Measured]:
    app = f"bench{uuid.uuid4().hex[:10]}"
    client = KazooClient(hosts=zk, timeout=10.0)
    client.start(timeout=30)
    try:
        provision_streams(client, AppPaths(app), stream_names(app, args.streams))
        with MemberGroup(zk, app, directory, session_timeout=args.session_timeout) as group:
            return _Run(client, group, args.streams).run(args.members)
    finally:
        client.stop()
        client.close()


def _summary(runs: list[list[Measured]]) -> list[dict[str, object]]:
    rows = []
    for i, first in enumerate(runs[0]):
        same = [run[i] for run in runs]
        seconds = [m.seconds for m in same]
        rows.append(
            {
                "event": first.event,
                "members": first.members,
                "seconds_median": statistics.median(seconds),
                "seconds_min": min(seconds),
                "seconds_max": max(seconds),
                "after_join_median": _median_or_none([m.after_join for m in same]),
                "moved_median": statistics.median(m.moved for m in same),
                "minimum_median": statistics.median(m.minimum for m in same),
                "takes_median": statistics.median(m.takes for m in same),
            }
        )
    return rows


def _median_or_none(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _table(rows: list[dict[str, object]]) -> str:
    header = f"{'event':<8} {'members':>7} {'seconds (median, min-max)':>27} {'after join':>10} "
    header += f"{'moved':>6} "
    header += f"{'minimum':>7} {'takes':>6}"
    lines = [header, "-" * len(header)]
    for r in rows:
        span = f"{r['seconds_median']:.2f} ({r['seconds_min']:.2f}-{r['seconds_max']:.2f})"
        joined = "-" if r["after_join_median"] is None else f"{r['after_join_median']:.2f}"
        lines.append(
            f"{r['event']:<8} {r['members']:>7} {span:>27} {joined:>10} {r['moved_median']:>6} "
            f"{r['minimum_median']:>7} {r['takes_median']:>6}"
        )
    return "\n".join(lines)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.balancer_convergence")
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--streams", type=int, default=64)
    parser.add_argument("--session-timeout", type=float, default=4.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=OUT)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, print the table, write the JSON."""
    args = _parse(argv)
    with ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-")))
        zk = os.environ.get("SESSIONIZER_ZK")
        if not zk:
            zk = stack.enter_context(LocalCluster(scratch / "cluster", brokers=0)).zk_connect
        runs = []
        for i in range(args.repeat):
            directory = scratch / f"run{i}"
            directory.mkdir()
            runs.append(_one_run(zk, args, directory))
    rows = _summary(runs)
    print(_table(rows))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "benchmark": "balancer_convergence",
        "params": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "zookeeper": "SESSIONIZER_ZK" if os.environ.get("SESSIONIZER_ZK") else "LocalCluster",
        "cpus": os.cpu_count(),
        "summary": rows,
        "runs": [[asdict(m) for m in run] for run in runs],
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
