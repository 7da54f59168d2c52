"""`NodeConfig`: everything one consumer node needs, frozen and validated."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import Literal

from balancer.config import BALANCE_POLICIES, BalancePolicy
from framework.kernel import compiled
from framework.kernel.config import ConnectionConfig
from framework.kernel.errors import ConfigError
from framework.node.collector import COLLECTOR_THRESHOLD
from sessionizer.sinks import DEFAULT_MAX_MESSAGE_BYTES

__all__ = [
    "AGREED",
    "ANNOUNCED",
    "DELIVERIES",
    "Delivery",
    "NodeConfig",
    "announced_settings",
    "default_node_id",
]

Delivery = Literal["at-least-once", "at-most-once", "exactly-once"]
DELIVERIES: tuple[Delivery, ...] = ("at-least-once", "at-most-once", "exactly-once")
AGREED = ("delivery",)
"""The settings every node of an app must share: each announces them in its membership
znode (the balancer's `agreed`), one that differs is refused, `status` shows them."""
ANNOUNCED = ("hot_path",)
"""What each node says of itself in its membership znode (the balancer's `announced`) for
`status` to show; nodes may differ (both hot paths write the same bytes)."""


def announced_settings() -> dict[str, str]:
    """This process's values of the `ANNOUNCED` settings: the hot path it runs (a node whose
    compiled build is stale runs Python, and `status` shows `compiled+python`)."""
    return {"hot_path": compiled.choice().path}


def default_node_id() -> str:
    """`<host>-<pid>`: unique per process on a machine, readable in `status`."""
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True)
class NodeConfig:
    """One node's settings; times in seconds."""

    connection: ConnectionConfig
    processor: str = ""
    """The user's processor as `module:Class` (unused when `Node` is given an instance)."""
    node_id: str = field(default_factory=default_node_id)
    commit_interval: float = 1.0
    session_timeout: float = 10.0
    delivery: Delivery = "at-least-once"
    drain_seconds: float | None = None
    poll_timeout: float = 0.2
    max_poll_records: int = 2000
    stats_interval: float = 10.0
    delivery_timeout: float = 30.0
    """How long the sink waits for the brokers to acknowledge output before it counts as failed."""
    sink_stall_timeout: float = 300.0
    """Output failing this long with no acknowledgement: `sink_stalled`, and /readyz 503."""
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    """A session whose JSON is larger than this is dead-lettered as a reference."""
    max_unsent: int = 10_000
    """At-most-once: output held back per stream before the stream stops reading."""
    metrics_port: int | None = None
    """Serve /metrics, /healthz and /readyz on this port (0: any free port; None: off)."""
    metrics_host: str = "0.0.0.0"
    balance: BalancePolicy = "count"
    """`count`: spread <= 1 stream; `load`: per-node load within `balance_tolerance` of the mean."""
    balance_tolerance: float = 0.2
    balance_interval: float = 30.0
    """`load`: at most a few moves per interval, and a moved stream stays put for one."""
    handover: bool = True
    """Hand engines over on planned moves (False: none written nor used; every move replays)."""
    dead_letter_warn_share: float = 0.05
    """Warn once per stream when more than this share of its fragments are late or dead letters."""
    gc_threshold: int | None = COLLECTOR_THRESHOLD
    """Allocations between two scans of the young objects by Python's collector (its default
    is 700), start-up's objects frozen; None: the collector as Python sets it
    (`framework.node.collector`)."""

    def __post_init__(self) -> None:
        if self.processor and ":" not in self.processor:
            raise ConfigError(
                f"--processor {self.processor!r} must be MODULE:CLASS, "
                "e.g. sessionizer.examples.weblog:WebSessions"
            )
        for name in (
            "commit_interval",
            "session_timeout",
            "poll_timeout",
            "stats_interval",
            "delivery_timeout",
            "sink_stall_timeout",
        ):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.drain_seconds is not None and self.drain_seconds < 0:
            raise ConfigError(f"--drain must be >= 0 seconds, got {self.drain_seconds}")
        if self.delivery not in DELIVERIES:
            raise ConfigError(f"delivery must be one of {', '.join(DELIVERIES)}: {self.delivery}")
        if self.metrics_port is not None and not 0 <= self.metrics_port <= 65535:
            raise ConfigError(f"--metrics-port must be a TCP port, got {self.metrics_port}")
        if self.balance not in BALANCE_POLICIES:
            raise ConfigError(f"--balance must be count or load, got {self.balance!r}")
        if not 0 < self.balance_tolerance < 1:
            raise ConfigError(
                f"--balance-tolerance must be in (0, 1), got {self.balance_tolerance}"
            )
        if not 0 < self.dead_letter_warn_share <= 1:
            raise ConfigError(
                f"dead_letter_warn_share must be in (0, 1], got {self.dead_letter_warn_share}"
            )
        if self.balance_interval <= 0:
            raise ConfigError(f"--balance-interval must be > 0 s, got {self.balance_interval}")
        if self.gc_threshold is not None and self.gc_threshold < 1:
            raise ConfigError(f"gc_threshold must be >= 1 or None, got {self.gc_threshold}")
        for name in ("max_poll_records", "max_message_bytes", "max_unsent"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")

    @property
    def stall_limit(self) -> float:
        """How long one loop step may legitimately block (a flush, then a commit round)."""
        return self.delivery_timeout + self.session_timeout + 5.0

    @property
    def shutdown_deadline(self) -> float:
        """Seconds a stop may take once asked (after a drain): the session timeout plus 4 s.

        The promise is "within the session timeout plus 5 s"; a second of it is left for
        the process to end after the deadline fires.
        """
        return self.session_timeout + 4.0

    @property
    def agreed(self) -> dict[str, str]:
        """This node's values of the `AGREED` settings."""
        return {name: str(getattr(self, name)) for name in AGREED}
