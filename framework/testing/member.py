"""A runnable balancer member for tests and benchmarks.

    python -m framework.testing.member --zk HOSTS --app APP --id ID [--drain SECONDS]
        [--zk-auth S:C]

Runs a `Balancer` from one loop, logs every assignment change as one JSON line
on stdout (`event="assignment"`, `node`, `streams`), commits a small fake state
(a counter, compact JSON `{"counter", "node"}`) to each held stream every
`--commit-interval` seconds through `state.zookeeper_store.ZooKeeperRecords`,
the one fenced writer of `stream_state/<stream>`, so fencing is exercised, and
exits 0 on SIGTERM after releasing everything (or draining).  With `--zk-auth`
(env `SESSIONIZER_ZK_AUTH`) it authenticates as that identity and creates its
znodes with that identity's ACL; refused access (NoAuth) exits 2 with one line.

Its "decode" of a stream's state, on taking the stream: an empty record is a
counter at 0; its own counter JSON resumes the counter; a `StreamState` record
(what `sessionizer streams reset --from-offset N` writes) resumes the counter at
its committed offset N.  Anything else is a corrupt record: the member calls
`Balancer.quarantine(stream, reason)` (logged as `corrupt_state`), which is how
the tests drive the quarantine end to end without a real node.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from types import FrameType

import structlog
from kazoo.exceptions import KazooException

from balancer import claims
from balancer.balancer import Balancer
from balancer.config import BalancerConfig, NoopListener
from balancer.errors import MembershipLost, StreamFenced
from balancer.fencing import StreamLease
from balancer.machine import BalancerState
from framework.kernel.errors import ConfigError
from framework.kernel.paths import DEFAULT_NAMESPACE
from framework.kernel.stacks import stacks_on_signal
from state.errors import CommitUncertainError, CorruptStateError, FencedError, StateError
from state.record import StreamState
from state.zookeeper_store import ZooKeeperRecords

__all__ = ["NAME", "Member", "decode_counter", "main", "parse_args"]

NAME = "framework.member"
"""The name its error lines and logs carry: the program's name, kept from its first home."""
_DONE = (BalancerState.DRAINED, BalancerState.CLOSED)


def decode_counter(data: bytes, stream: str) -> int:
    """The counter a record holds; raise `CorruptStateError` if it is none of the three kinds.

    Empty: 0.  The member's counter JSON: its counter.  A `StreamState` record
    (written by `streams reset`): its committed offset.
    """
    if not data:
        return 0
    counter = claims.decode(data).get("counter")
    if isinstance(counter, int) and not isinstance(counter, bool) and counter >= 0:
        return counter
    return StreamState.decode(data, stream=stream).committed_offset


class Member(NoopListener):
    """Owner of one `Balancer`: keeps a fenced counter per held stream."""

    def __init__(self, config: BalancerConfig, commit_interval: float) -> None:
        self.balancer = Balancer(config, self)
        self.records = ZooKeeperRecords(self.balancer.client, self.balancer.paths.stream_states)
        self.node = config.consumer_id
        self.commit_interval = commit_interval
        self.stopping = False
        self._versions: dict[str, int] = {}  # the state version we last wrote, per stream
        self._counters: dict[str, int] = {}
        self._uncertain: set[str] = set()  # last commit's outcome unknown: re-read first
        self._logged: list[str] | None = None
        self.log = structlog.get_logger(NAME).bind(node=self.node)

    # -- BalancerListener ----------------------------------------------------------

    def on_assigned(self, leases: Sequence[StreamLease]) -> None:
        """Start counting from whatever the previous owner committed."""
        kept = [lease.stream for lease in leases if self._load(lease)]
        self.log.info("assigned", streams=kept)

    def _load(self, lease: StreamLease) -> bool:
        """Read the stream's counter at the lease's epoch; give the stream up if we cannot."""
        stream = lease.stream
        try:
            data, version = self.records.read(stream)
            if version != lease.epoch:
                raise FencedError(stream, expected=lease.epoch, found=version)
            counter = decode_counter(data, stream)
        except CorruptStateError as exc:
            self.log.warning("corrupt_state", stream=stream, error=exc.problem)
            self.balancer.quarantine(stream, f"not a counter nor a state record: {exc.problem}")
            return False
        except (StateError, KazooException) as exc:
            # Without the previous owner's counter we would write it backwards: give it up.
            self.log.warning("state_unreadable", stream=stream, error=repr(exc))
            self.balancer.report_fenced(stream)
            return False
        self._counters[stream] = counter
        self._versions[stream] = lease.epoch
        return True

    def on_revoked(self, streams: Sequence[str]) -> None:
        """Last commit before the claims go."""
        for stream in streams:
            if not self.balancer.paused:
                self._commit(stream)
            self._forget(stream)
        self.log.info("revoked", streams=list(streams))

    def on_lost(self, streams: Sequence[str]) -> None:
        """Gone already: drop without committing."""
        for stream in streams:
            self._forget(stream)
        self.log.warning("lost", streams=list(streams))

    def on_paused(self) -> None:
        """Stop committing until resumed."""
        self.log.warning("paused")

    def on_resumed(self) -> None:
        """Commits may go on."""
        self.log.info("resumed")

    # -- the fake state --------------------------------------------------------------

    def commit_all(self) -> None:
        """Commit every held stream, unless the connection is suspended."""
        if self.balancer.paused:
            return
        for stream in list(self._versions):
            self._commit(stream)

    def _commit(self, stream: str) -> None:
        if stream not in self._versions:
            return  # fenced earlier in this round
        try:
            if stream in self._uncertain:
                self._versions[stream] = self.balancer.current_version(stream)
                self._uncertain.discard(stream)
            data = claims.encode({"counter": self._counters[stream] + 1, "node": self.node})
            self._versions[stream] = self.records.write(stream, data, self._versions[stream])
            self._counters[stream] += 1
        except (FencedError, StreamFenced, MembershipLost) as exc:
            self.log.warning("commit_rejected", stream=stream, reason="fenced", error=str(exc))
            self._forget(stream)
            self.balancer.report_fenced(stream)
        except (CommitUncertainError, KazooException) as exc:
            # Unknown outcome: re-read the version (only while the claim is ours) first.
            self.log.warning("commit_rejected", stream=stream, reason="connection", error=str(exc))
            self._uncertain.add(stream)

    def _forget(self, stream: str) -> None:
        self._versions.pop(stream, None)
        self._counters.pop(stream, None)
        self._uncertain.discard(stream)

    def log_assignment(self) -> None:
        """One line per change of the held set: what the tests compare with ZooKeeper."""
        streams = sorted(self.balancer.leases)
        if streams != self._logged:
            self._logged = streams
            self.log.info(
                "assignment",
                streams=streams,
                count=len(streams),
                target=self.balancer.target,
                state=str(self.balancer.state),
            )

    # -- the loop ------------------------------------------------------------------

    def run(self, drain: float | None) -> int:
        """Balance and commit until SIGTERM, then drain or release everything."""
        with self.balancer:
            self._loop(lambda: not self.stopping)
            if drain is not None:
                self.balancer.drain(drain)
                deadline = time.monotonic() + drain + 2 * self.balancer.config.session_timeout
                self._loop(lambda: self.balancer.state not in _DONE and time.monotonic() < deadline)
        self.log_assignment()
        self.log.info("stopped")
        return 0

    def _loop(self, go_on: Callable[[], bool]) -> None:
        next_commit = time.monotonic() + self.commit_interval
        while go_on():
            self.balancer.poll(0.05)
            self.log_assignment()
            if time.monotonic() >= next_commit:
                self.commit_all()
                next_commit = time.monotonic() + self.commit_interval

    def stop(self, signum: int = 0, frame: FrameType | None = None) -> None:
        """Signal handler: only asks the loop to finish."""
        self.stopping = True


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options (each with its environment variable where one exists)."""
    parser = argparse.ArgumentParser(prog="python -m framework.testing.member", description=__doc__)
    parser.add_argument(
        "--zk",
        default=os.environ.get("SESSIONIZER_ZK"),
        help="ZooKeeper hosts [env: SESSIONIZER_ZK]",
    )
    parser.add_argument(
        "--app",
        default=os.environ.get("SESSIONIZER_APP", "sessionizer"),
        help="app name [env: SESSIONIZER_APP] (default: sessionizer)",
    )
    parser.add_argument("--id", required=True, help="this member's consumer id")
    parser.add_argument(
        "--zk-auth",
        metavar="SCHEME:CREDENTIALS",
        default=os.environ.get("SESSIONIZER_ZK_AUTH") or None,
        help="ZooKeeper authentication, e.g. digest:user:password [env: SESSIONIZER_ZK_AUTH]",
    )
    parser.add_argument("--namespace", default=DEFAULT_NAMESPACE)
    parser.add_argument(
        "--drain",
        type=float,
        default=None,
        metavar="SECONDS",
        help="on SIGTERM, release one stream at a time over SECONDS",
    )
    parser.add_argument("--session-timeout", type=float, default=10.0)
    parser.add_argument("--debounce", type=float, default=0.2)
    parser.add_argument("--commit-interval", type=float, default=0.2)
    return parser.parse_args(argv)


def _configure_logging() -> None:
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stdout),
    )
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `python -m framework.testing.member`."""
    args = parse_args(argv)
    _configure_logging()
    try:
        config = BalancerConfig(
            zk_hosts=args.zk or "",
            app=args.app,
            consumer_id=args.id,
            namespace=args.namespace,
            session_timeout=args.session_timeout,
            debounce=args.debounce,
            zk_auth=args.zk_auth,
        )
        member = Member(config, args.commit_interval)
        signal.signal(signal.SIGTERM, member.stop)
        signal.signal(signal.SIGINT, member.stop)
        with stacks_on_signal(lambda stacks: member.log.warning("thread_stacks", threads=stacks)):
            return member.run(args.drain)
    except ConfigError as exc:  # a wrong --zk, --app or --zk-auth: one line, no traceback
        print(f"{NAME}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
