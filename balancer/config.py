"""The balancer's settings (frozen, validated) and the owner's callback contract."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from balancer.claims import MEMBER_FIELDS
from balancer.fencing import StreamLease
from balancer.load_plan import LoadPolicy
from framework.kernel.client_settings import parse_zk_auth
from framework.kernel.errors import ConfigError
from framework.kernel.paths import DEFAULT_NAMESPACE, AppPaths

__all__ = [
    "BALANCE_POLICIES",
    "BalancePolicy",
    "BalancerConfig",
    "BalancerListener",
    "NoopListener",
]

BalancePolicy = Literal["count", "load"]
BALANCE_POLICIES: tuple[BalancePolicy, ...] = ("count", "load")


@dataclass(frozen=True)
class BalancerConfig:
    """One member's settings; times in seconds."""

    zk_hosts: str
    app: str
    consumer_id: str
    namespace: str = DEFAULT_NAMESPACE
    session_timeout: float = 10.0
    # Watch events arriving within this window are handled by one balance pass.
    debounce: float = 0.2
    # A pass runs at least this often even without events (a watch can be missed).
    resync_interval: float = 30.0
    # Back-off after a pass failed on a ZooKeeper error.
    retry_delay: float = 0.5
    # How long another live session may hold our membership znode before we give up.
    duplicate_timeout: float = 30.0
    # Informational (stored in the membership znode): reserved for load-based balancing.
    capacity: int | None = None
    # `SCHEME:CREDENTIALS` (e.g. `digest:user:password`) for the client the balancer builds
    # when given none; its znodes are then created with that identity's ACL only.
    zk_auth: str | None = field(default=None, repr=False)
    # `count`: spread <= 1 stream (overflow slots); `load`: per-member load within
    # `load_tolerance` of the mean (docs/balancing.md, "Balancing by load").
    balance: BalancePolicy = "count"
    load_tolerance: float = 0.2
    # Hysteresis: a load move must close the gap by more than this fraction of the mean.
    load_margin: float = 0.05
    # At most `load_max_moves` load moves per `load_interval`, and each moved stream
    # cools down for one interval; loads are averaged over a third of it.
    load_interval: float = 30.0
    load_max_moves: int = 4
    # Settings every member of the app must share (a node's delivery mode): announced in
    # the membership znode, and a member that finds another with a different value
    # leaves at its join (`MembersDisagree`).
    agreed: Mapping[str, str] = field(default_factory=dict)
    # What this member says about itself for `status` (a node's hot path): announced in
    # the membership znode too, but members may differ.
    announced: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.zk_hosts:
            raise ConfigError("no ZooKeeper address: zk_hosts is empty")
        self.paths.consumer(self.consumer_id)  # validates namespace, app and id
        if self.session_timeout <= 0:
            raise ConfigError(f"session_timeout must be > 0, got {self.session_timeout}")
        for name in ("debounce", "resync_interval", "retry_delay", "duplicate_timeout"):
            if getattr(self, name) < 0:
                raise ConfigError(f"balancer {name} must be >= 0, got {getattr(self, name)}")
        if self.capacity is not None and self.capacity < 1:
            raise ConfigError(f"balancer capacity must be >= 1, got {self.capacity}")
        if self.zk_auth is not None:
            parse_zk_auth(self.zk_auth)
        taken = {*MEMBER_FIELDS, "balance", *self.agreed}.intersection(self.announced)
        if taken:
            raise ConfigError(
                f"node {self.consumer_id}: announced {sorted(taken)} would overwrite a "
                "field of the membership znode; give them other names"
            )
        if self.balance not in BALANCE_POLICIES:
            raise ConfigError(f"--balance must be count or load, got {self.balance!r}")
        try:
            self.load_policy  # noqa: B018 - validates the load settings
        except ValueError as exc:
            raise ConfigError(f"node {self.consumer_id}: {exc}") from exc

    @property
    def paths(self) -> AppPaths:
        """The app's ZooKeeper layout."""
        return AppPaths(self.app, self.namespace)

    @property
    def load_policy(self) -> LoadPolicy:
        """The `--balance load` knobs, for `balancer.load_plan`."""
        return LoadPolicy(
            tolerance=self.load_tolerance,
            margin=self.load_margin,
            max_moves=self.load_max_moves,
            interval=self.load_interval,
        )

    @property
    def load_window(self) -> float:
        """Time constant of the per-stream load means: a third of the interval."""
        return self.load_interval / 3

    @property
    def load_publish_interval(self) -> float:
        """Loads are written at most this often: a tenth of the interval, at least 1 s."""
        return max(1.0, self.load_interval / 10)

    @property
    def load_pass_interval(self) -> float:
        """Under `load`, a pass runs at least this often (loads change without watch events)."""
        return min(self.resync_interval, max(1.0, self.load_interval / 5))


class BalancerListener(Protocol):
    """What the owner is told; every call happens on the owner's thread, inside `poll`.

    Order for one stream: `on_assigned` -> (`on_paused` -> `on_resumed`)* ->
    `on_revoked` (commit now; the claim is deleted after it returns) or `on_lost`
    (the stream is already gone: do not commit).
    """

    def on_assigned(self, leases: Sequence[StreamLease]) -> None:
        """Streams newly taken, each with its fencing epoch."""

    def on_revoked(self, streams: Sequence[str]) -> None:
        """Streams about to be released: commit their state before returning."""

    def on_lost(self, streams: Sequence[str]) -> None:
        """Streams taken away (session lost or fenced): drop them without committing."""

    def on_paused(self) -> None:
        """The connection is suspended: stop handing out records and stop committing."""

    def on_resumed(self) -> None:
        """The connection is back and the claims we still hold are verified."""


class NoopListener:
    """A listener that ignores everything; subclass it to override only some calls."""

    def on_assigned(self, leases: Sequence[StreamLease]) -> None:
        """Ignore."""

    def on_revoked(self, streams: Sequence[str]) -> None:
        """Ignore."""

    def on_lost(self, streams: Sequence[str]) -> None:
        """Ignore."""

    def on_paused(self) -> None:
        """Ignore."""

    def on_resumed(self) -> None:
        """Ignore."""
