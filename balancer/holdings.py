"""`Holdings`: what one member holds in ZooKeeper, and the passes that change it.

It owns the leases, the overflow slot, the membership znode and the session
they belong to; `Balancer` decides *when* to call it (state machine, events,
timers).  Every method runs on the owner's thread and may call ZooKeeper;
kazoo errors propagate to `Balancer.poll`, which retries later.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Sequence
from itertools import islice

import structlog
from kazoo.client import KazooClient

from balancer import claims, load_plan, plan, quarantine
from balancer.config import BalancerConfig, BalancerListener
from balancer.errors import MembershipLost, StreamFenced
from balancer.fencing import StreamLease
from balancer.load import LoadReporter, read_view

__all__ = ["Holdings"]


class Holdings:
    """This member's leases, overflow slot and membership, kept in step with ZooKeeper."""

    def __init__(
        self,
        client: KazooClient,
        config: BalancerConfig,
        listener: BalancerListener,
        *,
        cost: plan.CostFunction,
        rng: random.Random,
    ) -> None:
        self.client = client
        self.config = config
        self.paths = config.paths
        self.node = config.consumer_id
        self.leases: dict[str, StreamLease] = {}
        self.slot: int | None = None
        self.session: int | None = None  # the session our ephemerals belong to
        self.joined = False  # our membership znode exists
        self.target = 0
        self.stream_count = 0
        self._maybe_ours: set[str] = set()  # claims whose create/delete outcome is unknown
        self._listener = listener
        self._cost = cost
        self._rng = rng
        self._log = structlog.get_logger(__name__).bind(node=self.node)
        self.reporter = LoadReporter(
            client,
            self.paths,
            self.node,
            window=config.load_window,
            publish_interval=config.load_publish_interval,
        )

    # -- membership ------------------------------------------------------------------

    def join(self, session: int) -> bool:
        """Create our membership znode under `session`; False while another session has it."""
        info = {
            **claims.member_info(self.config.capacity),
            "balance": self.config.balance,
            **self.config.announced,
            **self.config.agreed,
        }
        if not claims.join(self.client, self.paths, self.node, info, session):
            return False
        self.session, self.joined = session, True
        # Claims or slots of this session we do not know of: a take cut short by a
        # connection loss, or one sent on the new session before we saw LOST.
        held, slots = claims.owned(self.client, self.paths, session)
        claims.release(self.client, self.paths, held.difference(self.leases), session)
        for index in slots - {self.slot}:
            claims.delete_if_ours(self.client, self.paths.overflow(index), session)
        return True

    def leave(self) -> None:
        """Delete our membership znode and slot, so the others count without us."""
        if not self.joined or self.session is None:
            return
        claims.delete_if_ours(self.client, self.paths.consumer(self.node), self.session)
        self.joined = False
        if self.slot is not None:
            claims.delete_if_ours(self.client, self.paths.overflow(self.slot), self.session)
            self.slot = None

    def lose_session(self) -> None:
        """The session ended: its ephemerals are gone, so drop everything locally."""
        self.drop(sorted(self.leases), reason="session_lost")
        self.slot, self.session, self.joined = None, None, False
        self._maybe_ours.clear()

    def verify(self, session: int) -> None:
        """After a reconnect: keep only the claims whose ephemeral owner is still `session`."""
        held, slots = claims.owned(self.client, self.paths, session)
        self.drop(sorted(set(self.leases) - held), reason="not_ours_after_reconnect")
        if self.slot is not None and self.slot not in slots:
            self.slot = None

    # -- balancing -------------------------------------------------------------------

    def balance_pass(self, members: Sequence[str]) -> None:
        """One balance pass (DESIGN section 4) for the group `members`, by the configured policy."""
        session = self._session()
        if self._maybe_ours:
            claims.release(self.client, self.paths, self._maybe_ours, session)
            self._maybe_ours.clear()
        active = self.client.get_children(self.paths.active_streams)
        claimed = set(self.client.get_children(self.paths.claimed_streams))
        # Read after the claims: a claim freed by a quarantining owner was freed after
        # its marker was created, so this listing has the marker (ZooKeeper's order).
        quarantined = quarantine.names(self.client, self.paths)
        streams = plan.balanceable(active, quarantined)
        self.stream_count = len(streams)
        self.drop(sorted(set(self.leases) - claimed), reason="claim_vanished")
        if self.config.balance == "load":
            self._load_pass(members, streams, claimed, session)
            return
        shares = plan.share(len(streams), len(members))
        self._settle_slot(shares, free=len(set(streams) - claimed))
        self.target = plan.target(shares, self.slot is not None)
        moves = plan.moves(
            self.leases, streams, claimed, self.target, cost=self._cost, rng=self._rng
        )
        self._log.debug(
            "balance_pass",
            members=len(members),
            streams=len(streams),
            quarantined=len(quarantined),
            held=len(self.leases),
            target=self.target,
            slot=self.slot,
        )
        if moves.release:
            self.release(moves.release)
        if moves.need:
            self._claim(moves.claim, moves.need, session)

    def _load_pass(
        self, members: Sequence[str], streams: Sequence[str], claimed: set[str], session: int
    ) -> None:
        """A pass of `--balance load`: carry out our part of the plan every member computes."""
        if self.slot is not None:  # overflow slots belong to the count policy
            claims.delete_if_ours(self.client, self.paths.overflow(self.slot), session)
            self.slot = None
        view = read_view(self.client, self.paths, members, streams, claimed, now=time.time())
        planned = load_plan.plan(view, self.config.load_policy)
        mine = sorted(s for s, member in planned.assignment.items() if member == self.node)
        self.target = len(mine)
        self._log.debug(
            "balance_pass",
            policy="load",
            members=len(members),
            streams=len(streams),
            held=len(self.leases),
            target=self.target,
            balanced=planned.balanced,
            budget=planned.budget,
            loads={m: round(v, 2) for m, v in planned.node_loads.items()},
        )
        gone = sorted(set(self.leases).difference(streams))
        moving = [m for m in planned.moves if m.source == self.node and m.stream in self.leases]
        for move in moving:
            self.reporter.mark_moved(move.stream, view.now)
            self._log.info(
                "stream_moved",
                stream=move.stream,
                at=round(view.now, 3),
                to=move.destination,
                load=round(move.load, 3),
                loads={m: round(v, 2) for m, v in planned.node_loads.items()},
            )
        if gone or moving:
            self.release([*gone, *(m.stream for m in moving)])
        free = [s for s in mine if s not in view.owners and s not in self.leases]
        if free:
            self._claim(free, len(free), session)

    def _settle_slot(self, shares: plan.Share, *, free: int) -> None:
        taken = claims.taken_slots(self.client, self.paths)
        if self.slot is not None and self.slot not in taken:
            self.slot = None  # deleted under us (by hand?): compete again
        slots = plan.slot_plan(self.slot, shares, taken, held=len(self.leases), free=free)
        if slots.drop is not None:
            claims.delete_if_ours(self.client, self.paths.overflow(slots.drop), self._session())
            self.slot = None
        for index in slots.candidates:
            if claims.claim_slot(self.client, self.paths, index, self.node):
                self.slot = index
                break

    def _claim(self, candidates: Iterable[str], need: int, session: int) -> None:
        taken: list[StreamLease] = []
        left = iter(candidates)
        try:
            while len(taken) < need:
                # As many takes in flight as streams still needed: never one too many.
                batch = list(islice(left, need - len(taken)))
                if not batch:
                    break
                self._maybe_ours.update(batch)  # until each take's outcome is known
                for stream, lease in claims.take_each(
                    self.client, self.paths, batch, self.node, session
                ):
                    self._maybe_ours.discard(stream)
                    if lease is not None:
                        self.leases[stream] = lease
                        taken.append(lease)
        finally:
            if taken:  # also when a later take failed: these are ours
                self._log.info("streams_taken", streams=[lease.stream for lease in taken])
                self._listener.on_assigned(taken)

    def release(self, streams: Sequence[str]) -> None:
        """Revoke (the owner commits inside the callback), then delete the claims."""
        if not streams:
            return
        self._listener.on_revoked(list(streams))
        for stream in streams:
            self.leases.pop(stream, None)
        self._maybe_ours.update(streams)  # if the delete fails, the next pass retries it
        claims.release(self.client, self.paths, streams, self._session())
        self._maybe_ours.difference_update(streams)
        self._log.info("streams_released", streams=list(streams))

    def release_cheapest(self) -> None:
        """Release the one stream cheapest to move (a drain step)."""
        self.release(plan.cheapest(self.leases, 1, self._cost))

    def drop(self, streams: Sequence[str], *, reason: str) -> None:
        """Forget streams that are no longer ours, telling the owner not to commit them."""
        if not streams:
            return
        for stream in streams:
            self.leases.pop(stream, None)
        self._log.warning("streams_lost", streams=list(streams), reason=reason)
        self._listener.on_lost(list(streams))

    def forget_fenced(self, stream: str) -> bool:
        """The owner was fenced on `stream`: forget it; free the claim if it is still ours."""
        if self.leases.pop(stream, None) is None:
            return False
        self._maybe_ours.add(stream)
        return True

    def quarantine(self, stream: str, reason: str) -> quarantine.Outcome | None:
        """Mark `stream` quarantined and forget it like a fenced one; None if not held.

        The marker is created (checked against the epoch we hold) before the
        claim is freed by the next pass, so no other member sees the stream
        free and unmarked.  kazoo errors propagate after the stream is forgotten.
        """
        lease = self.leases.get(stream)
        if lease is None:
            return None
        try:
            return quarantine.mark(
                self.client, self.paths, stream, lease.epoch, reason=reason, node=self.node
            )
        finally:
            self.forget_fenced(stream)

    def current_version(self, stream: str) -> int:
        """Re-read the state version of a stream we hold (after an uncertain commit)."""
        if self.session is None:
            raise MembershipLost(self.node, "cannot verify a stream while disconnected")
        lease = self.leases.get(stream)
        if lease is None:
            raise StreamFenced(stream, expected=-1, node=self.node)
        # State first, then claim: if the claim is still ours after the read, no
        # one else can have moved the version we read (see `claims.release`).
        state = self.client.exists(self.paths.stream_state(stream))
        claim = self.client.exists(self.paths.claim(stream))
        if state is None or claim is None or claim.ephemeralOwner != self.session:
            raise StreamFenced(stream, expected=lease.epoch, node=self.node)
        return int(state.version)

    def _session(self) -> int:
        if self.session is None:
            raise MembershipLost(self.node, "no session yet")
        return self.session
