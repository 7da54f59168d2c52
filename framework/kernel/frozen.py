"""`slot_writers`: build frozen slotted dataclass records on a hot path without `__setattr__`.

A frozen dataclass's generated `__init__` writes each field through
`object.__setattr__(self, name, value)`, a builtin call with a lookup by name per
field: about 1.7 µs for `FinishedSession`'s ten fields, which the engine builds once
per session (benchmarks/HOT_PATH.md, round 8).  A slotted class's fields are member
descriptors, whose `__set__` writes the slot directly: about half the time.  A hot
path keeps the class (its `__init__`, equality, hashing, pickling and immutability are
the dataclass's) and only builds instances through a factory written next to it.

On the compiled path the build's `_sessionizer_records` does the same natively
(`native_slot_builder`): one call per instance instead of a frame and a method-wrapper
call per field (benchmarks/HOT_PATH.md, round 11).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, is_dataclass
from typing import Any

from framework.kernel import compiled
from framework.kernel.errors import WrongType

__all__ = ["native_slot_builder", "slot_descriptors", "slot_writers"]

SlotWriter = Callable[[Any, Any], None]


def slot_writers(cls: type[Any]) -> tuple[SlotWriter, ...]:
    """Return the slot descriptors' `__set__` of a slotted dataclass's fields, in field order.

    A factory unpacks them into one name per field, so a field added to the class
    without the factory fails at import (too many values to unpack), not later.
    """
    return tuple(descriptor.__set__ for descriptor in slot_descriptors(cls))


def native_slot_builder(cls: type[Any]) -> Callable[..., Any] | None:
    """Return a native `(*field values) -> instance` of a slotted dataclass, or None off the
    compiled path (or without the build's `_sessionizer_records`)."""
    descriptors = slot_descriptors(cls)
    native = compiled.native("_sessionizer_records")
    if native is None:
        return None
    builder: Callable[..., Any] = native.SlottedBuilder(cls, descriptors)
    return builder


def slot_descriptors(cls: type[Any]) -> tuple[Any, ...]:
    """Return the member descriptors of a slotted dataclass's fields, in field order."""
    if not is_dataclass(cls) or "__slots__" not in cls.__dict__:
        raise WrongType(f"{cls.__qualname__} is not a slotted dataclass")
    return tuple(cls.__dict__[item.name] for item in fields(cls))
