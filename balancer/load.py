"""Each stream's recent load: measured from the owner's counts, published to ZooKeeper, read back.

The owner's loop hands the balancer cumulative counts (`Balancer.report_load`);
`LoadMeter` turns them into exponentially weighted rates per stream, and
`LoadReporter` writes `stream_load/<stream>` (compact JSON) for the streams
we hold, at most every `publish_interval` and only when the rate changed
meaningfully.  Every member reads all of them when it plans (`read_loads`).
Only the owner writes a stream's load; a stale owner's late write is harmless
(the load is advice to the planner, never state), and the next owner
overwrites it once it has measured the stream itself.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

import structlog
from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from balancer import claims
from balancer.load_plan import MAX_STREAM_LOAD, LoadView
from framework.kernel.errors import InvalidSetting
from framework.kernel.limits import MAX_EVENT_TIME_MS
from framework.kernel.paths import AppPaths
from framework.kernel.safe_json import loads_object

__all__ = [
    "MAX_BUSY",
    "MAX_MOVED_AT",
    "LoadMeter",
    "LoadReporter",
    "StreamLoad",
    "read_loads",
    "read_view",
]

# Publish again when the rate moved by more than this fraction (plus an absolute floor in
# fragments/s, so an idle stream's decaying rate is not rewritten for ever).
_CHANGE = 0.1
_FLOOR = 0.05

MAX_BUSY = 1e6
"""The largest busy share (seconds of processing per second) a published load may claim."""
MAX_MOVED_AT = MAX_EVENT_TIME_MS / 1000
"""The latest `moved_at` believed (seconds): the end of year 9999, like event times."""


@dataclass(frozen=True)
class StreamLoad:
    """What `stream_load/<stream>` holds."""

    rate: float | None
    """Fragments per second, an exponentially weighted mean; None: not measured yet."""
    busy: float | None
    """Seconds of processing per second (the owner's loop time, shared out by fragments)."""
    node: str = ""
    """The owner that measured it."""
    moved_at: float | None = None
    """Wall-clock seconds when a load move of the stream last started (cool-down, move cap)."""

    def encode(self) -> bytes:
        """Compact JSON, readable with zkCli."""
        value: dict[str, float | str] = {"node": self.node}
        if self.rate is not None and self.busy is not None:
            value.update(rate=round(self.rate, 3), busy=round(self.busy, 6))
        if self.moved_at is not None:
            value["moved_at"] = round(self.moved_at, 3)
        return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes | None) -> StreamLoad | None:
        """The load in `data`, or None if it is not one (never raises, for any bytes).

        A rate outside [0, `MAX_STREAM_LOAD`] or a busy share outside [0, `MAX_BUSY`]
        is no usable measurement (the planner takes the mean); a `moved_at` that is not
        a wall-clock time in [0, `MAX_MOVED_AT`] s is none.
        """
        value = loads_object(data)
        if value is None:
            return None
        rate = _number(value.get("rate"), MAX_STREAM_LOAD)
        busy = _number(value.get("busy"), MAX_BUSY)
        moved_at = _number(value.get("moved_at"), MAX_MOVED_AT)
        node = value.get("node", "")
        if rate is None or busy is None:
            rate = busy = None  # not a usable measurement: the planner takes the mean
        return cls(rate, busy, node if isinstance(node, str) else "", moved_at)

    def differs(self, other: StreamLoad) -> bool:
        """True when the rates differ enough to be worth a write."""
        if self.rate is None or other.rate is None:
            return self.rate is not other.rate
        return abs(self.rate - other.rate) > _CHANGE * other.rate + _FLOOR


def _number(value: object, most: float) -> float | None:
    """A float in [0, `most`], or None (missing, or anything else)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0 <= value <= most else None


@dataclass
class _Track:
    """One stream's last counts and its running means."""

    at: float
    fragments: int
    rate: float = 0.0
    busy: float = 0.0
    observed: float = 0.0  # seconds of measurement behind the means


class LoadMeter:
    """Exponentially weighted fragments/s and busy s/s per stream, with time constant `window`."""

    def __init__(self, window: float) -> None:
        if window <= 0:
            raise InvalidSetting(f"load window must be > 0, got {window}")
        self.window = window
        self._tracks: dict[str, _Track] = {}
        self._busy: float | None = None

    def sample(self, now: float, fragments: Mapping[str, int], busy_seconds: float) -> None:
        """Take cumulative counts (monotonic `now`, fragments per stream, the loop's busy seconds).

        A stream missing from `fragments` is forgotten; a count that went down (the
        stream was resumed afresh) starts its measurement again.
        """
        busy = 0.0 if self._busy is None else max(0.0, busy_seconds - self._busy)
        self._busy = busy_seconds
        for stream in set(self._tracks) - set(fragments):
            del self._tracks[stream]
        deltas = {}
        for stream, count in fragments.items():
            track = self._tracks.get(stream)
            if track is None or count < track.fragments or now <= track.at:
                self._tracks[stream] = _Track(now, count)
                continue
            deltas[stream] = count - track.fragments
        total = sum(deltas.values())
        for stream, delta in deltas.items():
            self._advance(self._tracks[stream], now, delta, busy * delta / total if total else 0.0)
        for stream, count in fragments.items():
            self._tracks[stream].fragments = count

    def _advance(self, track: _Track, now: float, fragments: int, busy: float) -> None:
        elapsed = now - track.at
        rate, load = fragments / elapsed, busy / elapsed
        if track.observed == 0:
            track.rate, track.busy = rate, load  # the first interval: no history to weigh
        else:
            alpha = 1.0 - math.exp(-elapsed / self.window)
            track.rate += alpha * (rate - track.rate)
            track.busy += alpha * (load - track.busy)
        track.observed += elapsed
        track.at = now

    def estimate(self, stream: str) -> tuple[float, float] | None:
        """(fragments/s, busy s/s) once the stream was measured for a whole window, else None."""
        track = self._tracks.get(stream)
        if track is None or track.observed < self.window:
            return None
        return track.rate, track.busy


_WRITES_PER_MULTI = 256
"""Loads written per ZooKeeper multi-op: ~100 B each, far below the 1 MB request limit."""


class LoadReporter:
    """Publishes the loads of the streams we hold, from the owner's thread."""

    def __init__(
        self,
        client: KazooClient,
        paths: AppPaths,
        node: str,
        *,
        window: float,
        publish_interval: float,
    ) -> None:
        self.client = client
        self.paths = paths
        self.node = node
        self.meter = LoadMeter(window)
        self.publish_interval = publish_interval
        self._published: dict[str, StreamLoad] = {}
        self._next = 0.0
        self._log = structlog.get_logger(__name__).bind(node=node)

    def due(self, now: float) -> bool:
        """True when a publish round is due (monotonic `now`)."""
        return now >= self._next

    def publish(self, now: float, held: Collection[str]) -> int:
        """Write the loads of `held` streams that changed meaningfully; return how many.

        Pipelined: one round trip for the streams published for the first time (their
        last value, for its move time) and one for the writes, however many streams.
        """
        self._next = now + self.publish_interval
        for stream in set(self._published) - set(held):
            del self._published[stream]
        estimates = {s: e for s in sorted(held) if (e := self.meter.estimate(s)) is not None}
        first = [s for s in estimates if s not in self._published]
        found = read_loads(self.client, self.paths, first) if first else {}
        changed: dict[str, StreamLoad] = {}
        for stream, (rate, busy) in estimates.items():
            last = self._published.get(stream) or found.get(stream)
            load = StreamLoad(rate, busy, self.node, last.moved_at if last else None)
            if last is not None and last.node == self.node and not load.differs(last):
                self._published[stream] = last
            else:
                changed[stream] = load
        self._write_many(changed)
        return len(changed)

    def mark_moved(self, stream: str, at: float) -> None:
        """Record that a load move of `stream` starts now (before its planned release)."""
        last = self._published.get(stream) or read_loads(self.client, self.paths, [stream]).get(
            stream
        )
        estimate = self.meter.estimate(stream)
        if estimate is not None:
            load = StreamLoad(estimate[0], estimate[1], self.node, at)
        elif last is not None:
            load = replace(last, moved_at=at)
        else:
            load = StreamLoad(None, None, self.node, at)  # unmeasured: planners take the mean
        self._write_one(stream, load)

    def _write_many(self, loads: Mapping[str, StreamLoad]) -> None:
        """Set every load in one multi-op per `_WRITES_PER_MULTI` (one round trip and one
        log write each, where a set per stream cost both per stream); a batch that fails
        (some stream's first load: no znode yet) is written one stream at a time."""
        items = list(loads.items())
        for start in range(0, len(items), _WRITES_PER_MULTI):
            batch = items[start : start + _WRITES_PER_MULTI]
            multi = self.client.transaction()
            for stream, load in batch:
                multi.set_data(self.paths.stream_load(stream), load.encode())
            if any(isinstance(result, Exception) for result in multi.commit()):
                for stream, load in batch:
                    self._write_one(stream, load)
            else:
                self._published.update(batch)

    def _write_one(self, stream: str, load: StreamLoad) -> None:
        path, data = self.paths.stream_load(stream), load.encode()
        try:
            self.client.set(path, data)
        except NoNodeError:
            try:
                self.client.create(path, data)
            except NodeExistsError:
                self.client.set(path, data)
        self._published[stream] = load


def read_loads(
    client: KazooClient, paths: AppPaths, streams: Collection[str] | None = None
) -> dict[str, StreamLoad]:
    """The published loads of `streams` (default: every stream that has one), pipelined."""
    if streams is None:
        try:
            streams = client.get_children(paths.stream_loads)
        except NoNodeError:
            return {}
    pending = [(s, client.get_async(paths.stream_load(s))) for s in sorted(streams)]
    loads = {}
    for stream, result in pending:
        try:
            data = result.get()[0]
        except NoNodeError:
            continue
        load = StreamLoad.decode(data)
        if load is not None:
            loads[stream] = load
    return loads


def read_view(
    client: KazooClient,
    paths: AppPaths,
    members: Sequence[str],
    streams: Sequence[str],
    claimed: Collection[str],
    *,
    now: float,
) -> LoadView:
    """What a `--balance load` pass plans from: claims with their owners, loads, move times.

    `claimed` is the listing of `claimed_streams` the pass already made; a claim
    deleted before its owner is read counts as free (taking it then simply fails).
    """
    owners = {
        stream: str(data.get("consumer"))
        for stream, data in claims.read_owners(client, paths).items()
        if stream in claimed
    }
    published = read_loads(client, paths)
    return LoadView(
        members=members,
        streams=streams,
        owners=owners,
        loads={s: p.rate for s, p in published.items() if p.rate is not None},
        moved_at={s: p.moved_at for s, p in published.items() if p.moved_at is not None},
        now=now,
    )
