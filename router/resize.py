"""A live resize in the registry, and a producer's part in it (docs/resize.md).

The registry records a resize in the data of the `active_streams` znode, beside the
count it changes (`{"count": M, "created", "resize": {"epoch", "from", "to",
"started"}}`), so the count and the resize change together.  `resize_of` reads it
(None: no resize was ever recorded), `record_resize` writes it (the command).

A producer that sees a resize whose `from` is the count it routes with writes its
`resize` marker to every old stream, flushes, and routes by `to` from then on
(`StreamProducer.switch`); `markers` are those records.
"""

from __future__ import annotations

import json
import time
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NoNodeError

from framework.kernel.errors import InvalidArgument
from framework.kernel.safe_json import loads_object
from router.errors import ProvisioningError
from router.resize_wire import Epoch, ResizeMarker, encode_control

__all__ = ["ResizeInProgress", "markers", "read_resize", "record_resize", "resize_of"]


class ResizeInProgress(ProvisioningError):
    """A resize was asked while another, not yet settled everywhere, is recorded."""


def resize_of(data: dict[str, Any] | None) -> Epoch | None:
    """The resize recorded in `active_streams`' data, None when there is none (or it is not
    one: a registry written before resizes existed has none)."""
    if not data:
        return None
    found = data.get("resize")
    if not isinstance(found, dict):
        return None
    values = [found.get(name) for name in ("epoch", "from", "to")]
    numbers = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    if len(numbers) != 3:
        return None
    try:
        return Epoch(*numbers)
    except InvalidArgument:
        return None


def read_resize(client: KazooClient, parent: str) -> Epoch | None:
    """The latest resize recorded under `parent` (`active_streams`), if any."""
    try:
        data, _stat = client.get(parent)
    except NoNodeError:
        return None
    return resize_of(loads_object(data) if data else None)


def record_resize(client: KazooClient, parent: str, new: int) -> Epoch:
    """Record a resize to `new` streams (the count becomes `new`); return its epoch.

    A compare-and-set on the znode's version, so two commands cannot both start one.
    """
    try:
        raw, stat = client.get(parent)
    except NoNodeError as exc:
        raise ProvisioningError(f"{parent} does not exist: create the streams first") from exc
    data = loads_object(raw) if raw else None
    count = (data or {}).get("count")
    if not isinstance(count, int) or count < 1 or data is None:
        raise ProvisioningError(f"{parent} holds no stream count: create the streams first")
    previous = resize_of(data)
    epoch = Epoch((previous.epoch if previous else 0) + 1, count, new)
    started = int(time.time() * 1000)
    data = {**data, "count": new, "resize": {"epoch": epoch.epoch, "from": count, "to": new}}
    data["resize"]["started"] = started
    try:
        client.set(parent, json.dumps(data).encode(), version=stat.version)
    except BadVersionError as exc:
        raise ResizeInProgress(f"{parent} changed meanwhile: another command resized it") from exc
    except KazooException as exc:
        raise ProvisioningError(f"recording the resize in {parent} failed: {exc}") from exc
    return epoch


def markers(
    epoch: Epoch, producer: str | None, clock_ms: int
) -> list[tuple[int, bytes | None, bytes, list[tuple[str, bytes]], int]]:
    """The `resize` marker records as (stream index, key, value, headers, timestamp): a
    producer's, one per old stream; the command's start markers (`producer` None), one
    per stream of either count (written before the resize is recorded)."""
    key, value, headers, stamp = encode_control(ResizeMarker(epoch, producer, clock_ms))
    streams = range(epoch.old) if producer is not None else range(max(epoch.old, epoch.new))
    return [(index, key, value, headers, stamp) for index in streams]
