"""A producer's entry in ZooKeeper, `producers/<producer id>`, and what it sees of the others.

The znode is ephemeral: the producer's ZooKeeper session is its heartbeat. Its
data is JSON: `{"streams": [names], "watermark": clock ms or null, "ended":
bool, "left": bool, "joined": bool, "host", "pid", "started"}` (DESIGN.md,
section 4; `left`: it stopped without ending its input and said so itself).

ZooKeeper only tells producers about each other; what the engine decides on is
in the log (docs/routing.md, "Several producers"). From it a producer learns

- whether other producers are live (`peers`): then it writes a watermark to
  every stream once per interval, since fragments carry no producer id and only
  a producer's watermarks move its clock on a stream;
- which producers vanished without ending (`gone`): it writes a `left` marker for
  each into the streams that one wrote, so the streams stop waiting for it;
- the latest resize recorded in `active_streams` (`resize`, docs/resize.md): a
  producer routing by its `from` count switches to its `to` count.

Callbacks only record what changed; the producer's own thread calls `poll()`,
which does the ZooKeeper reads (at most once per `poll_seconds`).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import structlog
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError

from framework.kernel.errors import ConfigError
from framework.kernel.paths import AppPaths
from framework.kernel.safe_json import loads_object
from router.errors import RouterError
from router.resize import read_resize
from router.resize_wire import Epoch

__all__ = [
    "GoneProducer",
    "PollResult",
    "ProducerIdTaken",
    "ProducerRegistry",
    "RegistryError",
    "default_producer_id",
]

_log = structlog.get_logger("sessionizer.producers")
_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:@+-")


def default_producer_id() -> str:
    """`<host>-<pid>`: unique among running producers; path-safe characters only."""
    host = "".join(c if c in _SAFE else "-" for c in socket.gethostname()) or "host"
    return f"{host[:150]}-{os.getpid()}"


class RegistryError(RouterError):
    """ZooKeeper refused or lost the producer's registration."""


class ProducerIdTaken(RegistryError, ConfigError):
    """Another running producer registered the same producer id."""

    def __init__(self, app: str, producer_id: str) -> None:
        self.producer_id = producer_id
        super().__init__(
            f"app {app!r}: producer id {producer_id!r} is registered by a running producer "
            "(producers/<id> exists): give this one another --producer-id "
            "(or SESSIONIZER_PRODUCER_ID), or stop the other one first"
        )


@dataclass(frozen=True, slots=True)
class GoneProducer:
    """A producer whose znode vanished while it had not ended: it gets a `left` marker."""

    producer_id: str
    clock_ms: int
    streams: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class PollResult:
    """What changed among the producers since the last poll."""

    peers: bool
    """Another producer of a stream this one writes is registered and has not ended."""
    gone: tuple[GoneProducer, ...] = ()
    rejoin: bool = False
    """Our session was lost (so was our znode): we registered again and must re-join."""
    resize: Epoch | None = None
    """The latest resize recorded for the app (read with the peers, at most once a poll)."""


class ProducerRegistry:
    """Registers one producer under `producers/<id>` and watches the others."""

    def __init__(
        self,
        client: KazooClient,
        paths: AppPaths,
        producer_id: str,
        streams: Sequence[str],
        *,
        poll_seconds: float = 1.0,
    ) -> None:
        self.producer_id = producer_id
        self._client = client
        self._paths = paths
        self._path = paths.producer(producer_id)
        self._streams = tuple(streams)
        self._poll_seconds = poll_seconds
        self._lock = threading.Lock()
        self._children: list[str] | None = None  # kept current by the watch
        self._lost = False  # set by the state listener
        self._known: dict[str, dict[str, Any]] = {}  # the others' latest data
        self._next_poll = 0.0
        self._clock: int | None = None
        self._ended = False
        self._left = False  # stopped without ending, and wrote its own `left` marker
        self._joined = False
        self._peers = False
        self._started = int(time.time() * 1000)

    def register(self) -> None:
        """Create our ephemeral znode; raise `ProducerIdTaken` if it exists."""
        try:
            self._client.ensure_path(self._paths.producers)
            self._client.create(self._path, self._data(), ephemeral=True)
        except NodeExistsError as exc:
            raise ProducerIdTaken(self._paths.app, self.producer_id) from exc
        except KazooException as exc:
            raise RegistryError(
                f"app {self._paths.app!r}: registering producer {self.producer_id!r} "
                f"at {self._path} failed: {exc}"
            ) from exc
        self._client.add_listener(self._on_state)
        self._client.ChildrenWatch(self._paths.producers, self._on_children)
        _log.info("producer_registered", producer=self.producer_id, streams=len(self._streams))

    def joined(self) -> None:
        """Our `joined` markers are in every stream (the znode says so)."""
        self._joined = True
        self._write()

    def publish(
        self, clock_ms: int | None, *, ended: bool = False, left: bool = False, force: bool = False
    ) -> None:
        """Record our latest watermark (and whether we ended, or left) in the znode.

        Written at once when we ended or left (or `force`), else at the next poll.
        """
        self._clock, self._ended = clock_ms, ended or self._ended
        self._left = left or self._left
        if force or ended or left:
            self._write()

    def poll(self) -> PollResult:
        """Read what changed (at most once per `poll_seconds`); cheap when nothing did."""
        now = time.monotonic()
        if now < self._next_poll:
            return PollResult(self._peers)
        self._next_poll = now + self._poll_seconds
        with self._lock:
            children = self._children  # kept current by the watch
            lost, self._lost = self._lost, False
        rejoin = lost and self._register_again()
        self._write()
        resize = self.resize()
        if children is None:
            return PollResult(self._peers, rejoin=rejoin, resize=resize)
        gone = self._refresh(set(children) - {self.producer_id})
        self._peers = any(
            not (data.get("ended") or data.get("left")) for data in self._known.values()
        )
        return PollResult(self._peers, gone, rejoin, resize)

    def resize(self) -> Epoch | None:
        """The latest resize recorded for the app (None: none, or unreadable just now)."""
        try:
            return read_resize(self._client, self._paths.active_streams)
        except KazooException as exc:  # read again at the next poll
            _log.warning("resize_unreadable", producer=self.producer_id, error=str(exc))
            return None

    def streams_changed(self, streams: Sequence[str]) -> None:
        """We write these streams now (a resize switched our count)."""
        self._streams = tuple(streams)
        self._write()

    def close(self) -> None:
        """Delete our znode (after `publish(..., ended=True)` if we ended)."""
        self._client.remove_listener(self._on_state)
        try:
            self._client.delete(self._path)
        except NoNodeError:
            pass  # the session was lost meanwhile: the znode is gone anyway
        except KazooException as exc:
            _log.warning("producer_unregister_failed", producer=self.producer_id, error=str(exc))

    def _refresh(self, children: set[str]) -> tuple[GoneProducer, ...]:
        """Re-read the others' data; return those that vanished without ending."""
        gone = []
        for name in sorted(set(self._known) - children):
            data = self._known.pop(name)
            if not (data.get("ended") or data.get("left")):
                clock = data.get("watermark")
                named = data.get("streams")
                streams = (
                    tuple(named)
                    if isinstance(named, list) and named and all(isinstance(s, str) for s in named)
                    else tuple(self._streams)
                )
                gone.append(GoneProducer(name, clock if isinstance(clock, int) else 0, streams))
        for name in children:
            try:
                raw, _stat = self._client.get(self._paths.producer(name))
            except NoNodeError:
                continue  # gone between the listing and the read; seen at the next poll
            except KazooException as exc:  # retried at the next poll
                _log.warning("producer_data_unreadable", producer=name, error=str(exc))
                continue
            known = loads_object(raw)  # never raises, whatever another producer wrote
            if known is None:  # retried at the next poll
                _log.warning("producer_data_unreadable", producer=name, error="not a JSON object")
                continue
            self._known[name] = known
        return tuple(gone)

    def _register_again(self) -> bool:
        try:
            self._client.create(self._path, self._data(), ephemeral=True)
        except NodeExistsError:
            return False  # still ours (the session was only suspended)
        except KazooException as exc:
            with self._lock:
                self._lost = True  # try again at the next poll
            _log.warning("producer_register_failed", producer=self.producer_id, error=str(exc))
            return False
        _log.warning("producer_registered_again", producer=self.producer_id)
        return True

    def _write(self) -> None:
        try:
            self._client.set(self._path, self._data())
        except NoNodeError:
            with self._lock:
                self._lost = True  # re-created at the next poll
        except KazooException as exc:
            _log.warning("producer_publish_failed", producer=self.producer_id, error=str(exc))

    def _data(self) -> bytes:
        return json.dumps(
            {
                "streams": list(self._streams),
                "watermark": self._clock,
                "ended": self._ended,
                "left": self._left,
                "joined": self._joined,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "started": self._started,
            }
        ).encode()

    def _on_children(self, children: list[str]) -> None:
        with self._lock:  # a kazoo callback: record and return
            self._children = list(children)

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST:
            with self._lock:
                self._lost = True
