"""`ZooKeeperPointers`: a stream's handover pointer, beside its registration in ZooKeeper.

The pointer is key `"handover"` of the JSON data of `active_streams/<stream>`
(DESIGN section 4: "topic, created; later: last owner, handover pointer"), and
key `"resumed"` says how the stream was last resumed (node, handover used or
not, records replayed).  A write is a version-checked read-modify-write, so the
registration's other fields are kept.
"""

from __future__ import annotations

import json
from typing import Any, Final

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NoNodeError

from state.errors import StateError
from state.handover import HandoverPointer

__all__ = ["ZooKeeperPointers"]

_ATTEMPTS: Final = 5


class ZooKeeperPointers:
    """Handover pointers in the data of `<parent>/<stream>` (the `active_streams` znodes)."""

    def __init__(self, client: KazooClient, parent: str) -> None:
        self.client = client
        self.parent = parent

    def path(self, stream: str) -> str:
        """The znode whose data holds the stream's pointer."""
        return f"{self.parent}/{stream}"

    def write(self, stream: str, pointer: HandoverPointer) -> None:
        """Store the pointer in the stream's registration; `StateError` if that fails."""
        self._update(stream, "handover", pointer.to_json())

    def resumed(self, stream: str, note: dict[str, Any]) -> None:
        """Record how the stream was last resumed (key `"resumed"`, for `sessionizer status`)."""
        self._update(stream, "resumed", note)

    def _update(self, stream: str, name: str, value: Any) -> None:
        path = self.path(stream)
        try:
            for _ in range(_ATTEMPTS):
                data, stat = self.client.get(path)
                fields = _fields(data)
                fields[name] = value
                try:
                    self.client.set(path, json.dumps(fields).encode(), version=stat.version)
                    return
                except BadVersionError:
                    continue  # someone rewrote the registration meanwhile: read it again
        except NoNodeError as exc:
            raise StateError(f"stream {stream}: not registered under {self.parent}") from exc
        except KazooException as exc:
            raise StateError(f"stream {stream}: {name} not written ({exc!r})") from exc
        raise StateError(f"stream {stream}: its registration kept changing; {name} not written")

    def read(self, stream: str) -> HandoverPointer | None:
        """The stream's pointer (None if there is none); `StateError` if ZooKeeper fails."""
        try:
            data, _ = self.client.get(self.path(stream))
        except NoNodeError:
            return None
        except KazooException as exc:
            raise StateError(f"stream {stream}: handover pointer unreadable ({exc!r})") from exc
        return HandoverPointer.from_json(_fields(data).get("handover"))


def _fields(data: bytes | None) -> dict[str, Any]:
    """The registration's JSON object (an empty one if it has none or is not JSON)."""
    try:
        value = json.loads(data or b"{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
