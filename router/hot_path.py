"""Which implementation decodes a record's msgpack value on a node's path: compiled or Python.

- `python` (the default): msgpack's decoder for every value, the reference.
- `compiled`: msgspec's C decoder, for a value that is a flat map of scalars (str,
  int, float, bool, None, bytes), the shape of nearly every fragment and watermark;
  anything else, and anything it refuses, is decoded by the Python path, so both
  give the same value or the same dead letter (tests/unit/test_hot_path_equivalence.py).

Not the default because it does not pay: alone msgspec decodes an apache value in
0.8 µs against msgpack's 1.5, but the whole decode is no faster, and the node's path
measured slower with it (msgpack interns map keys, which the hooks' lookups use);
benchmarks/HOT_PATH.md.  `SESSIONIZER_HOT_PATH=python|compiled` chooses at start (an
unknown value runs `python`, and the node says so); `select` changes it in a running
process (the equivalence tests).  `sessionizer node` logs the path (`hot_path` event).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Final, Literal, TypeAlias

from framework.kernel.errors import InvalidArgument

__all__ = [
    "ENV",
    "PATHS",
    "HotPath",
    "active",
    "compiled_available",
    "fast_unpacker",
    "requested",
    "select",
]

HotPath: TypeAlias = Literal["compiled", "python"]
PATHS: Final[tuple[HotPath, ...]] = ("compiled", "python")
ENV: Final = "SESSIONIZER_HOT_PATH"

# The types whose msgpack form msgspec and msgpack decode alike: top-level maps of these
# (keys and values) take the compiled path; containers, ext types (msgpack's Timestamp
# against msgspec's datetime) and array keys (a tuple against "unhashable") do not.
_SCALARS: Final = frozenset({str, int, float, bool, type(None), bytes})

Unpacker: TypeAlias = Callable[[bytes], "dict[Any, Any] | None"]


def _compiled() -> Unpacker | None:
    """msgspec's decoder as an unpacker of flat maps, or None without msgspec."""
    try:
        import msgspec
    except ImportError:  # a plain install without the wheel: the Python path
        return None

    def refuse(code: int, data: memoryview) -> Any:
        raise InvalidArgument(f"ext type {code}: decoded by the Python path")

    decode = msgspec.msgpack.Decoder(ext_hook=refuse).decode
    scalars = _SCALARS

    def unpack(value: bytes) -> dict[Any, Any] | None:
        """The value if it is a flat map of scalars, else None (the Python path decides)."""
        try:
            data = decode(value)
        except Exception:  # whatever is wrong, the Python path names it
            return None
        if (
            type(data) is dict
            and scalars.issuperset(map(type, data.values()))
            and scalars.issuperset(map(type, data))
        ):
            return data
        return None

    return unpack


_COMPILED: Final = _compiled()
_active: HotPath = "python"


def select(path: str) -> HotPath:
    """Make `path` the decoder of this process; return the path now active.

    `compiled` without msgspec installed falls back to `python` (see `active`).
    """
    global _active
    if path not in PATHS:
        raise InvalidArgument(f"{ENV} must be one of {', '.join(PATHS)}, got {path!r}")
    _active = "compiled" if path == "compiled" and _COMPILED is not None else "python"
    return _active


def compiled_available() -> bool:
    """True when the compiled path can run (msgspec is installed)."""
    return _COMPILED is not None


def active() -> HotPath:
    """The path this process decodes with."""
    return _active


def fast_unpacker() -> Unpacker | None:
    """The compiled unpacker when the compiled path is active, else None."""
    return _COMPILED if _active == "compiled" else None


def requested() -> str:
    """What `SESSIONIZER_HOT_PATH` asks for ("python" when unset)."""
    return os.environ.get(ENV, "python")


select(requested() if requested() in PATHS else "python")
