"""`Balancer`: one member of an app's group, driven by its owner's single loop.

kazoo's threads only put events on a queue (`_on_connection`, `_on_members`,
`_on_claims`, `_on_quarantine`); `poll()` applies them on the owner's thread, runs whatever the
current state has due (join, balance pass, drain step, verification), and the
owner's `BalancerListener` is called there too.  What we hold and the
ZooKeeper operations on it live in `Holdings`; this class decides when.
"""

from __future__ import annotations

import queue
import random
import time
from collections.abc import Callable, Mapping
from types import MappingProxyType

import structlog
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, KazooException, NoAuthError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState
from kazoo.recipe.watchers import ChildrenWatch

from balancer import claims, plan
from balancer.config import BalancerConfig, BalancerListener
from balancer.drain import DrainPace
from balancer.errors import BalancerError, DuplicateConsumer, MembersDisagree
from balancer.fencing import StreamLease
from balancer.holdings import Holdings
from balancer.machine import (
    BalancerState,
    ClaimsChanged,
    ConnectionChanged,
    Event,
    MembersChanged,
    QuarantineChanged,
    StateMachine,
    StreamsChanged,
)
from balancer.quarantine import Outcome
from framework.kernel.lifecycle import Lifecycle
from framework.kernel.zookeeper import check_access, new_client, refused

__all__ = ["Balancer"]

S = BalancerState
# Thesis 4.2.1: re-run a pass while the member count changes under it, up to this often.
_MAX_PASSES = 5
# Failures worth retrying later rather than raising to the owner.
_TRANSIENT = (KazooException, KazooTimeoutError)
# How often a node kept out of its membership znode says so (it retries every retry_delay).
_BUSY_EVERY_S = 5.0


class Balancer(Lifecycle):
    """Claims this member's share of an app's streams and keeps it balanced.

    Use as a context manager (or `start()` / `close()`), and call `poll()`
    from the owner's loop.  Not thread-safe: one owner thread drives it.
    """

    def __init__(
        self,
        config: BalancerConfig,
        listener: BalancerListener,
        *,
        client: KazooClient | None = None,
        cost: plan.CostFunction = plan.default_cost,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.paths = config.paths
        self.client = client or new_client(
            config.zk_hosts, auth=config.zk_auth, session_timeout=config.session_timeout
        )
        self._own_client = client is None
        self._listener = listener
        self._held = Holdings(self.client, config, listener, cost=cost, rng=rng or random.Random())
        # Not a SimpleQueue: in CPython 3.11 its get(timeout), interrupted by a signal handled
        # past the deadline, waits on for ever (until a put); the owner's SIGTERM then never
        # got back to its loop.  Queue waits on a lock, whose timed wait has no such flaw.
        self._events: queue.Queue[Event] = queue.Queue()
        self._machine = StateMachine(config.consumer_id)
        self._paused = False
        self._resume_to = S.BALANCING
        self._due: float | None = None  # when the current state's work runs next
        self._again = False  # a pass was asked for while one was running
        self._draining = False
        self._drain = DrainPace.over(0.0, 0, 0.0)  # replaced when a drain starts
        self._joining_since: float | None = None
        self._busy_said: float | None = None
        self._watching = False
        self._log = structlog.get_logger(__name__).bind(node=config.consumer_id)

    # -- what the owner reads ------------------------------------------------------

    @property
    def state(self) -> BalancerState:
        """The current state."""
        return self._machine.state

    @property
    def state_id(self) -> int:
        """Bumped on every state change."""
        return self._machine.state_id

    @property
    def leases(self) -> Mapping[str, StreamLease]:
        """The streams we hold, with the epoch each was taken at (read-only view)."""
        return MappingProxyType(self._held.leases)

    @property
    def connected(self) -> bool:
        """True while the ZooKeeper connection is up: a request now is answered, not queued.

        kazoo queues a request made while it reconnects until the connection is back,
        however long that is; the owner asks this before work it must not block on.
        """
        return bool(self.client.connected)

    @property
    def paused(self) -> bool:
        """True while the owner must not hand out records nor commit."""
        return self._paused

    @property
    def target(self) -> int:
        """How many streams the last pass aimed for."""
        return self._held.target

    # -- lifecycle -----------------------------------------------------------------

    def start(self) -> None:
        """Connect (if we own the client), create the layout, check access, start joining.

        Raises `framework.kernel.zookeeper.ZooKeeperAccessError` (a `ConfigError`) at once
        if the app's znodes belong to another ZooKeeper identity (wrong or missing
        --zk-auth), rather than retrying a join that can never succeed.
        """
        self.client.add_listener(self._on_connection)
        self._connect()
        try:
            claims.ensure_layout(self.client, self.paths)
            check_access(self.client, self.paths)
        except BaseException:
            self.client.remove_listener(self._on_connection)
            if self._own_client:
                self.client.stop()
                self.client.close()
            raise
        self._machine.to(S.JOINING)
        self._due = time.monotonic()

    def _connect(self) -> None:
        if not self._own_client:
            return
        try:
            self.client.start(timeout=self.config.session_timeout)
        except KazooTimeoutError as exc:
            raise BalancerError(
                f"node {self.config.consumer_id}: cannot reach ZooKeeper at "
                f"{self.config.zk_hosts} within {self.config.session_timeout:g} s; "
                "check the address"
            ) from exc

    def _open(self) -> None:
        self.start()

    def _close(self) -> None:
        self.close()

    def drain(self, seconds: float) -> None:
        """Leave the group now, then release one stream at a time over `seconds`."""
        if self._draining or self.state in (S.STOPPED, S.DRAINED, S.CLOSED):
            return
        self._draining = True
        self._drain = DrainPace.over(seconds, len(self._held.leases), time.monotonic())
        self._log.info("drain_started", seconds=seconds, streams=len(self._held.leases))
        if self.state is S.PAUSED:
            self._resume_to = S.DRAINING
        elif self.state is S.LOST:
            self._machine.to(S.DRAINED)
        else:
            self._machine.to(S.DRAINING)
            self._due = time.monotonic()

    def close(self) -> None:
        """Release everything at once (after `on_revoked`), leave, and disconnect."""
        if self.state is S.CLOSED:
            return
        try:
            if self.state not in (S.STOPPED, S.PAUSED, S.LOST):
                self._held.leave()
                self._held.release(sorted(self._held.leases))
        except _TRANSIENT as exc:
            self._log.warning("release_failed", error=repr(exc), note="claims end with session")
        finally:
            # Whatever could not be released: the owner must not commit it any more.
            self._held.drop(sorted(self._held.leases), reason="closing")
            self._machine.to(S.CLOSED)
            self.client.remove_listener(self._on_connection)
            if self._own_client:
                self.client.stop()
                self.client.close()

    # -- the owner's loop ----------------------------------------------------------

    def poll(self, timeout: float = 0.0) -> BalancerState:
        """Apply queued events and due work, waiting up to `timeout` for something to do."""
        if self.state in (S.STOPPED, S.CLOSED):
            raise BalancerError(
                f"node {self.config.consumer_id}: poll() on a {self.state} balancer"
            )
        deadline = time.monotonic() + timeout
        wake = deadline if self._due is None else min(deadline, self._due)
        for event in self._next_events(wake):
            self._apply(event)
        if self._due is not None and time.monotonic() >= self._due:
            if not self.connected:  # a request now would wait for the reconnect: later
                self._due = time.monotonic() + self.config.retry_delay
                return self.state
            if not self._guarded(self._run_due):
                self._due = time.monotonic() + self.config.retry_delay
        if self._held.reporter.due(time.monotonic()) and self.connected:
            self._guarded(self._publish_loads)
        return self.state

    def _guarded(self, work: Callable[[], None]) -> bool:
        """Run ZooKeeper work; False after a transient failure (logged), to retry later."""
        try:
            work()
        except NoAuthError as exc:  # the app's ACL changed under us: retrying cannot help
            raise refused(self.client, self.paths.root) from exc
        except _TRANSIENT as exc:
            self._log.warning("zookeeper_error", state=str(self.state), error=repr(exc))
            return False
        return True

    def report_load(self, fragments: Mapping[str, int], busy_seconds: float) -> None:
        """Take the owner's cumulative counts, to measure and publish each stream's load.

        `fragments`: per stream, since the owner resumed it (leave out a stream still
        replaying); `busy_seconds`: the loop's processing time so far.  Call it from the
        owner's loop, about once a second; `poll` writes `stream_load/<stream>` at most
        every `load_publish_interval`.
        """
        self._held.reporter.meter.sample(time.monotonic(), fragments, busy_seconds)

    def report_fenced(self, stream: str) -> None:
        """The owner's commit of `stream` was fenced: forget it and rebalance."""
        if self._held.forget_fenced(stream):
            self._log.warning("stream_fenced", stream=stream)
            self._request_pass()

    def quarantine(self, stream: str, reason: str) -> None:
        """The owner cannot decode `stream`'s state record: quarantine it and rebalance.

        Call it on the owner's thread, also from inside `on_assigned`, instead of
        `report_fenced`.  Creates `quarantined_streams/<stream>` (`{"reason",
        "node", "at"}`; an existing marker is fine) if the record is still at the
        epoch we hold, forgets the lease without `on_revoked` / `on_lost`, frees the
        claim in the next pass, which no longer counts the stream.  A stream we do
        not hold is ignored.  A ZooKeeper error is logged, not raised: the stream is
        then given up as after `report_fenced`, and its next owner quarantines it.
        """
        if stream not in self._held.leases:
            self._log.warning("quarantine_ignored", stream=stream, reason=reason, note="not held")
            return
        try:
            outcome = self._held.quarantine(stream, reason)
        except _TRANSIENT as exc:
            self._log.warning("quarantine_failed", stream=stream, reason=reason, error=repr(exc))
        else:
            if outcome is Outcome.MOVED:
                self._log.warning("quarantine_skipped", stream=stream, note="record rewritten")
            else:
                self._log.warning(
                    "stream_quarantined", stream=stream, reason=reason, outcome=outcome
                )
        self._request_pass()

    def current_version(self, stream: str) -> int:
        """Re-read the state version of a stream we hold, after an uncertain commit.

        Raises `StreamFenced` if the claim is no longer ours, `MembershipLost` if
        there is no session to check with.
        """
        return self._held.current_version(stream)

    # -- kazoo threads: enqueue only, never block, never call ZooKeeper --------------

    def _on_connection(self, state: str) -> None:
        self._events.put(ConnectionChanged(state))

    def _on_members(self, members: list[str]) -> bool | None:
        self._events.put(MembersChanged(tuple(members)))
        return False if self.state is S.CLOSED else None  # False ends the watch

    def _on_claims(self, claimed: list[str]) -> bool | None:
        self._events.put(ClaimsChanged(tuple(claimed)))
        return False if self.state is S.CLOSED else None

    def _on_streams(self, streams: list[str]) -> bool | None:
        self._events.put(StreamsChanged(tuple(streams)))
        return False if self.state is S.CLOSED else None

    def _on_quarantine(self, quarantined: list[str]) -> bool | None:
        self._events.put(QuarantineChanged(tuple(quarantined)))
        return False if self.state is S.CLOSED else None

    # -- applying events -----------------------------------------------------------

    def _next_events(self, until: float) -> list[Event]:
        events: list[Event] = []
        try:
            events.append(self._events.get(timeout=max(0.0, until - time.monotonic())))
            while True:
                events.append(self._events.get_nowait())
        except queue.Empty:
            return events

    def _apply(self, event: Event) -> None:
        match event:
            case ConnectionChanged(state=KazooState.SUSPENDED):
                self._suspend()
            case ConnectionChanged(state=KazooState.LOST):
                self._lose()
            case ConnectionChanged(state=KazooState.CONNECTED):
                self._reconnect()
            case MembersChanged() | QuarantineChanged() | StreamsChanged():
                self._request_pass()
            case ClaimsChanged(claimed=claimed):
                # Only worth a pass if one of ours vanished or some stream is free.
                held = self._held.leases.keys()
                if not held <= set(claimed) or len(claimed) < self._held.stream_count:
                    self._request_pass()

    def _request_pass(self) -> None:
        soon = time.monotonic() + self.config.debounce
        if self.state is S.BALANCING and self._due is not None:
            self._due = min(self._due, soon)  # debounce without postponing forever
            self._again = True  # in case we are inside the pass (an owner's callback)
        elif self.state is S.STABLE:
            self._machine.to(S.BALANCING)
            self._due = soon

    def _suspend(self) -> None:
        if self.state not in (S.JOINING, S.BALANCING, S.STABLE, S.DRAINING):
            return
        self._resume_to = self.state if self.state in (S.JOINING, S.DRAINING) else S.BALANCING
        self._machine.to(S.PAUSED)
        self._due = None
        self._set_paused(True)

    def _lose(self) -> None:
        if self.state in (S.STOPPED, S.LOST, S.DRAINED, S.CLOSED):
            return
        self._log.warning("session_lost", dropped=sorted(self._held.leases))
        self._set_paused(True)
        self._held.lose_session()
        self._machine.to(S.LOST)
        if self._draining:
            self._machine.to(S.DRAINED)  # nothing left to release
        self._due = None

    def _reconnect(self) -> None:
        if self.state is S.PAUSED:
            self._due = time.monotonic()  # verify our claims first (`_verify`)
        elif self.state is S.LOST:
            self._machine.to(S.JOINING)
            self._due = time.monotonic()

    # -- due work ------------------------------------------------------------------

    def _run_due(self) -> None:
        match self.state:
            case S.JOINING:
                self._join()
            case S.BALANCING | S.STABLE:  # STABLE: a periodic resync, a watch may be missed
                self._balance()
            case S.DRAINING:
                self._drain_step()
            case S.PAUSED:
                self._verify()

    def _current_session(self) -> int:
        client_id = self.client.client_id
        if client_id is None:
            raise ConnectionLoss("not connected")
        return int(client_id[0])

    def _join(self) -> None:
        session = self._current_session()
        now = time.monotonic()
        self._joining_since = self._joining_since or now
        if not self._held.join(session):
            waited = now - self._joining_since
            # An earlier incarnation's session keeps the znode until it expires: wait that out.
            if waited > max(self.config.duplicate_timeout, 2 * self.config.session_timeout):
                path = self.paths.consumer(self.config.consumer_id)
                raise DuplicateConsumer(self.config.consumer_id, path, waited)
            if self._busy_said is None or now - self._busy_said >= _BUSY_EVERY_S:
                self._busy_said = now
                self._log.warning(
                    "membership_busy",
                    waited=round(waited, 1),
                    note="another ZooKeeper session holds this node's id: a crashed run's until "
                    "it expires, or another node started with the same --id",
                )
            self._due = now + self.config.retry_delay
            return
        self._joining_since = self._busy_said = None
        # Checked once our znode exists: of two members started at once with different
        # settings, the later one to join sees the earlier (ZooKeeper's one order).
        disagreeing = claims.disagreeing(
            self.client, self.paths, self.config.consumer_id, self.config.agreed
        )
        if disagreeing:
            self._held.leave()
            raise MembersDisagree(
                self.config.consumer_id, self.config.app, self.config.agreed, disagreeing
            )
        self._watch()
        self._log.info("joined", session=f"{session:#x}")
        self._set_paused(False)
        self._machine.to(S.BALANCING)
        self._due = time.monotonic() + self.config.debounce

    def _watch(self) -> None:
        if self._watching:
            return  # ChildrenWatch re-arms itself after a reconnect or a new session
        ChildrenWatch(self.client, self.paths.active_consumers, self._on_members)
        ChildrenWatch(self.client, self.paths.claimed_streams, self._on_claims)
        ChildrenWatch(self.client, self.paths.quarantined_streams, self._on_quarantine)
        ChildrenWatch(self.client, self.paths.active_streams, self._on_streams)
        self._watching = True

    def _verify(self) -> None:
        session = self._current_session()
        if self._held.session is None or session != self._held.session:
            if self._held.session is not None:
                self._lose()  # a new session: kazoo's LOST is on its way, act on it now
            if self.state is not S.DRAINED:
                self._machine.to(S.JOINING)
                self._due = time.monotonic()
            return
        self._held.verify(session)
        self._machine.to(self._resume_to)
        self._due = time.monotonic()
        self._set_paused(False)

    def _balance(self) -> None:
        self._machine.to(S.BALANCING)
        self._again = False
        for _ in range(_MAX_PASSES):
            members = self.client.get_children(self.paths.active_consumers)
            if self.config.consumer_id not in members:
                self._log.warning("membership_missing")  # deleted by hand? join again
                self._held.joined = False
                self._machine.to(S.JOINING)
                self._due = time.monotonic()
                return
            self._held.balance_pass(members)
            if len(self.client.get_children(self.paths.active_consumers)) == len(members):
                break
        if self._again:  # the owner gave a stream up during the pass: pass again soon
            self._due = time.monotonic() + self.config.debounce
            return
        self._machine.to(S.STABLE)
        self._due = time.monotonic() + self._resync_interval()

    def _resync_interval(self) -> float:
        if self.config.balance == "load":
            return self.config.load_pass_interval  # loads change without any watch firing
        return self.config.resync_interval

    def _drain_step(self) -> None:
        self._held.leave()
        if not self._held.leases:
            self._log.info("drained")
            self._machine.to(S.DRAINED)
            self._due = None
            return
        self._held.release_cheapest()
        self._due = self._drain.step_done()  # from the drain's start: the steps' work adds nothing

    def _publish_loads(self) -> None:
        """Write the loads of the streams we hold (count policy too: `status` shows them)."""
        if self.state in (S.BALANCING, S.STABLE):
            self._held.reporter.publish(time.monotonic(), list(self._held.leases))

    def _set_paused(self, paused: bool) -> None:
        if paused == self._paused:
            return
        self._paused = paused
        if paused:
            self._listener.on_paused()
        else:
            self._listener.on_resumed()
