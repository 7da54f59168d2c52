"""`Settled`: a kazoo async result that is already settled, for fakes of a ZooKeeper client."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Settled"]


class Settled:
    """What kazoo's `*_async` calls return (`IAsyncResult`), settled when asked: `get` returns
    the call's result or raises its error, as a real one does once the reply is in."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self._call = call

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        """The result of the call, or its exception raised."""
        return self._call()
