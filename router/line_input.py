"""`read_lines`: the lines `sessionizer produce` reads, from a file or a pipe alike.

A file and standard input are read the same way: as UTF-8, a byte that is not
UTF-8 replaced by U+FFFD (the locale's reading of stdin would refuse it, or keep it
as a surrogate that no record can carry), lines ending at `\\n`, `\\r\\n` or `\\r`
with their ends kept, as `open(path, newline="")` gives them. And a reader of a live log
(`tail -f access.log | sessionizer produce -`) waits for lines without going deaf:
`on_idle` is called every `every` seconds while no line comes, or while lines come
slowly, so the producer still reports a failed delivery and follows the producer
registry (a live resize, a peer that died) when its input is quiet
(`StreamProducer.poll`).
"""

from __future__ import annotations

import codecs
import io
import os
import select
import time
from collections.abc import Callable, Iterator
from typing import BinaryIO

__all__ = ["DEFAULT_IDLE_SECONDS", "read_lines"]

DEFAULT_IDLE_SECONDS = 1.0
"""Seconds between two `on_idle` calls while lines are awaited (the registry's own pace)."""
_CHUNK = 1 << 16


def read_lines(
    source: BinaryIO,
    *,
    on_idle: Callable[[], None] | None = None,
    every: float = DEFAULT_IDLE_SECONDS,
) -> Iterator[str]:
    """The lines of `source` (a file, a pipe or a terminal), decoded as UTF-8 with bad bytes
    replaced; `on_idle()` runs every `every` seconds while they are awaited."""
    fd = source.fileno()
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    unended: list[str] = []  # read since the last line end (a list: a long line grows once)
    ready = select.poll()  # not select(): no limit on the descriptor's number
    ready.register(fd, select.POLLIN)
    due = time.monotonic() + every
    while True:
        if on_idle is not None:
            wait = due - time.monotonic()
            # A regular file is always ready: it reads on, with a call every `every` seconds.
            if wait <= 0 or not ready.poll(wait * 1000):
                on_idle()
                due = time.monotonic() + every
                continue
        data = os.read(fd, _CHUNK)
        if not data:
            break
        text = decoder.decode(data)
        # A final "\r" is not an end yet: its "\n" may come with the next read.
        end = len(text) - 1 if text.endswith("\r") else len(text)
        cut = max(text.rfind("\n", 0, end), text.rfind("\r", 0, end)) + 1
        if cut:
            unended.append(text[:cut])
            yield from io.StringIO("".join(unended), newline="")  # split as such a file is
            unended.clear()
        unended.append(text[cut:])
    unended.append(decoder.decode(b"", final=True))
    yield from io.StringIO("".join(unended), newline="")
