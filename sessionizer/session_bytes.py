"""`session_dumper`: one session object to bytes, as a handover and a resize migration move it.

Exact msgpack types by default (so the object comes back as it was), else the
processor's `dump_session` hook.  What cannot be dumped raises the caller's error
(`error(message)`): a handover then replays the stream, a migration leaves the
session where it is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgpack

from sessionizer.processor import StreamProcessor

__all__ = ["session_dumper"]


def session_dumper(
    processor: StreamProcessor[Any], error: Callable[[str], Exception]
) -> Callable[[Any], bytes]:
    """Pack one session object of `processor`; a failure raises `error(why)`."""
    custom = type(processor).dump_session is not StreamProcessor.dump_session

    def dump(session: Any) -> bytes:
        try:
            if custom:
                packed: bytes = msgpack.packb(processor.dump_session(session), use_bin_type=True)
            else:
                packed = msgpack.packb(session, use_bin_type=True, strict_types=True)
        except Exception as exc:  # user code or an unsupported type: the caller decides
            raise error(
                f"{type(processor).__name__} cannot dump a session object of type "
                f"{type(session).__name__} ({type(exc).__name__}: {exc}); define "
                "dump_session/load_session"
            ) from exc
        return packed

    return dump
