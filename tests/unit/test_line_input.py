"""`read_lines`: a pipe read as `open(path, newline="")` reads a file, and `on_idle` while
the pipe is quiet (router/line_input.py)."""

from __future__ import annotations

import contextlib
import io
import os
import random
import resource
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import pytest

from router.line_input import read_lines

PIECES = [
    b"GET /a",
    b"\r",
    b"\n",
    b"\r\n",
    b"\xff",
    b"\xe6\x9d\xb1",
    b"\xe6",
    b" ok",
    b"\xef\xbb\xbf",
]


@contextmanager
def _pipe() -> Iterator[tuple[BinaryIO, int]]:
    """(the read end as a binary file, the write end's descriptor)."""
    read_end, write_end = os.pipe()
    source = os.fdopen(read_end, "rb")
    try:
        yield source, write_end
    finally:
        source.close()
        with contextlib.suppress(OSError):  # the test may have closed it
            os.close(write_end)


def _as_a_file_reads_it(data: bytes) -> list[str]:
    return list(io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace", newline=""))


@pytest.mark.parametrize("seed", range(20))
def test_a_pipe_fed_in_random_pieces_gives_the_lines_a_file_of_the_same_bytes_gives(
    seed: int,
) -> None:
    rng = random.Random(seed)
    data = b"".join(rng.choice(PIECES) for _ in range(rng.randrange(0, 400)))
    with _pipe() as (source, write_end):

        def feed() -> None:
            at = 0
            while at < len(data):
                step = rng.randrange(1, 40)
                os.write(write_end, data[at : at + step])
                at += step
            os.close(write_end)

        writer = threading.Thread(target=feed)
        writer.start()
        lines = list(read_lines(source, on_idle=lambda: None, every=0.001))
        writer.join()
    assert lines == _as_a_file_reads_it(data)


def test_a_file_gives_its_lines_and_its_last_line_without_an_end(tmp_path: Path) -> None:
    path = tmp_path / "log"
    path.write_bytes(b"one\r\ntwo \xff\rthree\nlast")
    with path.open("rb") as source:
        assert list(read_lines(source)) == ["one\r\n", "two \ufffd\r", "three\n", "last"]


def test_on_idle_runs_while_the_pipe_is_quiet_and_between_its_lines() -> None:
    calls: list[int] = []  # how many lines had come at each idle call
    lines: list[str] = []
    with _pipe() as (source, write_end):
        script: list[bytes | None] = [b"first\n", b"second\n", None]

        def idle() -> None:
            # Nothing is written but here: the lines can only come after idle calls.
            calls.append(len(lines))
            if script:
                chunk = script.pop(0)
                if chunk is None:
                    os.close(write_end)
                else:
                    os.write(write_end, chunk)

        for line in read_lines(source, on_idle=idle, every=0.001):
            lines.append(line)
    assert lines == ["first\n", "second\n"]
    assert calls[0] == 0 and len(calls) >= 3


def test_what_on_idle_raises_ends_the_reading() -> None:
    class Failed(Exception):
        pass

    def idle() -> None:
        raise Failed("a delivery failed")

    with _pipe() as (source, _write_end), pytest.raises(Failed):
        list(read_lines(source, on_idle=idle, every=0.001))


def test_a_descriptor_numbered_past_select_s_limit_is_read() -> None:
    # select() refuses descriptors from 1024 on; a process with many files open has them.
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft <= 1500:
        pytest.skip(f"RLIMIT_NOFILE is {soft}: no descriptor 1500 to test with")
    with _pipe() as (source, write_end):
        high = os.dup2(source.fileno(), 1500)
        script = [b"late\n"]

        def idle() -> None:
            if script:
                os.write(write_end, script.pop())
            else:
                os.close(write_end)

        try:
            with os.fdopen(high, "rb") as far:
                lines = list(read_lines(far, on_idle=idle, every=0.001))
        finally:
            with contextlib.suppress(OSError):
                os.close(high)
    assert lines == ["late\n"]
