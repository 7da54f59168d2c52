"""The ZooKeeper layout of one app: the only place that builds balancer paths."""

from __future__ import annotations

import re
from dataclasses import dataclass

from framework.kernel.errors import ConfigError, InvalidArgument

__all__ = ["DEFAULT_NAMESPACE", "AppPaths"]

DEFAULT_NAMESPACE = "sessionizer"

# One path segment: nothing ZooKeeper treats specially ("/", ".", "..", control characters).
_SEGMENT_RE = re.compile(r"[A-Za-z0-9._:@+-]+")


def _segment(kind: str, value: str) -> str:
    if not _SEGMENT_RE.fullmatch(value) or value in (".", ".."):
        raise ConfigError(
            f"{kind} {value!r} cannot be a ZooKeeper path segment: use letters, digits and "
            "'._:@+-' only"
        )
    return value


@dataclass(frozen=True)
class AppPaths:
    """Paths under `/<namespace>/<app>` (thesis names kept, DESIGN section 4)."""

    app: str
    namespace: str = DEFAULT_NAMESPACE

    def __post_init__(self) -> None:
        _segment("namespace", self.namespace)
        _segment("app", self.app)

    @property
    def root(self) -> str:
        """`/<namespace>/<app>`."""
        return f"/{self.namespace}/{self.app}"

    @property
    def active_streams(self) -> str:
        """Parent of the persistent stream znodes (created by provisioning)."""
        return f"{self.root}/active_streams"

    @property
    def active_consumers(self) -> str:
        """Parent of the members' ephemeral znodes."""
        return f"{self.root}/active_consumers"

    @property
    def claimed_streams(self) -> str:
        """Parent of the ephemeral claims, one per owned stream."""
        return f"{self.root}/claimed_streams"

    @property
    def overflow_streams(self) -> str:
        """Parent of the ephemeral overflow slots `0..overflow-1`."""
        return f"{self.root}/overflow_streams"

    @property
    def stream_states(self) -> str:
        """Parent of the persistent per-stream state records."""
        return f"{self.root}/stream_state"

    @property
    def txn_writers(self) -> str:
        """Parent of the persistent writer records of exactly-once streams (`state.writers`)."""
        return f"{self.root}/txn_writers"

    @property
    def quarantined_streams(self) -> str:
        """Parent of the persistent quarantine markers, one per stream with a corrupt state."""
        return f"{self.root}/quarantined_streams"

    @property
    def stream_loads(self) -> str:
        """Parent of the persistent per-stream loads the owners publish (`--balance load`)."""
        return f"{self.root}/stream_load"

    @property
    def producers(self) -> str:
        """Parent of the producers' ephemeral znodes (streams written, latest watermark, ended)."""
        return f"{self.root}/producers"

    @property
    def resizes(self) -> str:
        """Parent of each stream's part in the latest live resize (docs/resize.md)."""
        return f"{self.root}/resize"

    @property
    def parents(self) -> tuple[str, ...]:
        """Every parent znode the balancer needs to exist."""
        return (
            self.active_streams,
            self.active_consumers,
            self.claimed_streams,
            self.overflow_streams,
            self.stream_states,
            self.quarantined_streams,
            self.stream_loads,
        )

    def stream(self, stream: str) -> str:
        """`active_streams/<stream>`."""
        return f"{self.active_streams}/{_segment('stream', stream)}"

    def consumer(self, consumer_id: str) -> str:
        """`active_consumers/<consumer id>`."""
        return f"{self.active_consumers}/{_segment('consumer id', consumer_id)}"

    def claim(self, stream: str) -> str:
        """`claimed_streams/<stream>`."""
        return f"{self.claimed_streams}/{_segment('stream', stream)}"

    def overflow(self, index: int) -> str:
        """`overflow_streams/<index>`."""
        if index < 0:
            raise InvalidArgument(f"an overflow slot index must be >= 0, got {index}")
        return f"{self.overflow_streams}/{index}"

    def stream_state(self, stream: str) -> str:
        """`stream_state/<stream>`: its version is the stream's fencing epoch."""
        return f"{self.stream_states}/{_segment('stream', stream)}"

    def producer(self, producer_id: str) -> str:
        """`producers/<producer id>`."""
        return f"{self.producers}/{_segment('producer id', producer_id)}"

    def quarantined(self, stream: str) -> str:
        """`quarantined_streams/<stream>`: while it exists, no member takes the stream."""
        return f"{self.quarantined_streams}/{_segment('stream', stream)}"

    def resize_stream(self, stream: str) -> str:
        """`resize/<stream>`: its owner's record of the epoch's start (and a source's barrier)."""
        return f"{self.resizes}/{_segment('stream', stream)}"

    def stream_load(self, stream: str) -> str:
        """`stream_load/<stream>`: the owner's recent load for the stream."""
        return f"{self.stream_loads}/{_segment('stream', stream)}"
