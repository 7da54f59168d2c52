"""What a `DeclarativeProcessor` (sessionizer.declarative) does per fragment: the
aggregates a session folds, each into one slot, when their condition
(sessionizer.declarative_conditions) holds.

Compiled on the hot path (`framework.kernel.compiled.MODULES`), so that a session is
folded without a Python frame per fragment; the `.py` file is the reference.  A
session's state is a list with one slot per aggregate, of msgpack-able values (a
handover carries it as it is, `distinct`'s values as a list).

Every failure while folding (a missing field, values that do not add or compare) is
an `AggregateError` naming the aggregate and the field: the engine makes the session's
fragments dead letters, as for any hook that raises.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

from sessionizer.declarative_conditions import Condition
from sessionizer.errors import AggregateError, HookError

__all__ = [
    "Aggregate",
    "Count",
    "Distinct",
    "First",
    "Last",
    "Max",
    "Min",
    "Plan",
    "Sum",
]


class Aggregate:
    """One result field of a session: its slot's start, fold, result and handover form."""

    def __init__(self, name: str | None, where: Condition | None) -> None:
        self.name = name
        """The fragment field it reads (None: `count`, which reads none)."""
        self.where = where

    def start(self) -> Any:
        """The slot of a session that folded nothing yet."""
        return None

    def fold(self, slot: Any, fragment: Mapping[str, Any]) -> Any:
        """Return the slot with one more fragment (that passed `where`) folded in."""
        raise NotImplementedError

    def result(self, slot: Any) -> Any:
        """The session's value of this aggregate."""
        return slot

    def dump(self, slot: Any) -> Any:
        """The slot as msgpack-able data, for a handover."""
        return slot

    def load(self, data: Any) -> Any:
        """The slot from `dump`'s data."""
        return data

    def kind(self) -> str:
        """The function that made it (`sum_of`), for messages."""
        raise NotImplementedError

    def describe(self) -> str:
        """The aggregate as written with `sessionizer.declarative`."""
        field = "" if self.name is None else repr(self.name)
        where = "" if self.where is None else f"where={self.where.describe()}"
        return f"{self.kind()}({', '.join(part for part in (field, where) if part)})"

    def __repr__(self) -> str:
        return self.describe()


class Count(Aggregate):
    """How many fragments (that pass `where`)."""

    def start(self) -> Any:
        return 0

    def fold(self, slot: Any, fragment: Mapping[str, Any]) -> Any:
        return slot + 1

    def kind(self) -> str:
        return "count"


class Sum(Aggregate):
    """The sum of a numeric field."""

    def start(self) -> Any:
        return 0

    def fold(self, slot: Any, fragment: Mapping[str, Any]) -> Any:
        value = fragment[self.name]  # type: ignore[index]  # a Sum reads a field
        kind = type(value)
        if kind is not int and kind is not float:  # not a bool, a str, a list, ...
            raise AggregateError(f"sum_of takes numbers, got a {kind.__name__}")
        return slot + value

    def kind(self) -> str:
        return "sum_of"


class Min(Aggregate):
    """The least value of a field (None: no fragment had one)."""

    def fold(self, slot: Any, fragment: Mapping[str, Any]) -> Any:
        value = fragment[self.name]  # type: ignore[index]
        if slot is None or value < slot:
            return value
        return slot

    def kind(self) -> str:
        return "min_of"


class Max(Aggregate):
    """The greatest value of a field (None: no fragment had one)."""

    def fold(self, slot: Any, fragment: Mapping[str, Any]) -> Any:
        value = fragment[self.name]  # type: ignore[index]
        if slot is None or value > slot:
            return value
        return slot

    def kind(self) -> str:
        return "max_of"


class First(Aggregate):
    """The first value of a field that is not None, in event-time order."""

    def fold(self, slot: Any, fragment: Mapping[str, Any]) -> Any:
        if slot is None:
            return _shared(fragment[self.name])  # type: ignore[index]
        return slot

    def kind(self) -> str:
        return "first"


class Last(Aggregate):
    """The last value of a field that is not None, in event-time order."""

    def fold(self, slot: Any, fragment: Mapping[str, Any]) -> Any:
        value = fragment[self.name]  # type: ignore[index]
        return slot if value is None else _shared(value)

    def kind(self) -> str:
        return "last"


def _shared(value: Any) -> Any:
    """One object for equal strings: open sessions share the pages and sites they hold."""
    # Interned strings are freed with their last reference: a unique value costs nothing.
    return sys.intern(value) if type(value) is str else value


class Distinct(Aggregate):
    """How many different values a field took (Python equality: 1, 1.0 and True are one)."""

    def start(self) -> Any:
        return {}  # a dict, not a set: insertion order, so a handover's bytes are stable

    def fold(self, slot: Any, fragment: Mapping[str, Any]) -> Any:
        seen: dict[Any, None] = slot
        seen[fragment[self.name]] = None  # type: ignore[index]
        return seen

    def result(self, slot: Any) -> Any:
        return len(slot)

    def dump(self, slot: Any) -> Any:
        return list(slot)

    def load(self, data: Any) -> Any:
        return dict.fromkeys(data)

    def kind(self) -> str:
        return "distinct"


class Plan:
    """A processor's aggregates by result name: a session's slots, folded in that order.

    A condition shared by several aggregates (the same object) is tested once per
    fragment.
    """

    def __init__(self, names: Sequence[str], aggregates: Sequence[Aggregate]) -> None:
        self.names = list(names)
        self.aggregates = list(aggregates)
        self.conditions: list[Condition] = []
        self.guards: list[int] = []
        """Per aggregate, the index of its `where` in `conditions`; -1 without one."""
        for aggregate in self.aggregates:
            where = aggregate.where
            if where is None:
                self.guards.append(-1)
                continue
            known = [index for index, seen in enumerate(self.conditions) if seen is where]
            if not known:
                self.conditions.append(where)
            self.guards.append(known[0] if known else len(self.conditions) - 1)

    def start(self) -> list[Any]:
        """The state of a new session: every aggregate's start."""
        return [aggregate.start() for aggregate in self.aggregates]

    def fold(self, slots: list[Any], fragment: Mapping[str, Any]) -> None:
        """Fold one fragment into a session's slots; raise `AggregateError` naming the part."""
        verdicts = [-1] * len(self.conditions)  # -1 not tested yet, else 0 or 1
        guards = self.guards
        index = 0
        failure: Exception | None = None
        try:
            for aggregate in self.aggregates:
                guard = guards[index]
                if guard >= 0:
                    verdict = verdicts[guard]
                    if verdict < 0:
                        verdict = 1 if self.conditions[guard].holds(fragment) else 0
                        verdicts[guard] = verdict
                    if verdict == 1:
                        slots[index] = aggregate.fold(slots[index], fragment)
                else:
                    slots[index] = aggregate.fold(slots[index], fragment)
                index += 1
        except Exception as exc:  # raised again as AggregateError, below
            failure = exc
        if failure is not None:
            # Raised outside the handler: no chained context, the same text on both paths
            # (compiled code does not keep `from None`).
            raise self._failed(index, failure)

    def results(self, slots: list[Any]) -> dict[str, Any]:
        """The finished session: each aggregate's result under its name, in order."""
        return {
            name: aggregate.result(slot)
            for name, aggregate, slot in zip(self.names, self.aggregates, slots, strict=True)
        }

    def dump(self, slots: list[Any]) -> list[Any]:
        """The slots as msgpack-able data (`StreamProcessor.dump_session`)."""
        return [
            aggregate.dump(slot) for aggregate, slot in zip(self.aggregates, slots, strict=True)
        ]

    def load(self, data: Any) -> list[Any]:
        """The slots from `dump`'s data; raise `HookError` if they do not fit this plan."""
        if not isinstance(data, list) or len(data) != len(self.aggregates):
            raise HookError(f"expected a list of {len(self.aggregates)} slots, got {data!r:.100}")
        return [aggregate.load(item) for aggregate, item in zip(self.aggregates, data, strict=True)]

    def _failed(self, index: int, exc: Exception) -> AggregateError:
        aggregate = self.aggregates[index]
        if isinstance(exc, KeyError):
            detail = f"the fragment has no field {exc.args[0]!r}" if exc.args else "KeyError"
        elif isinstance(exc, AggregateError):  # a fold's own check
            detail = str(exc)
        else:
            detail = f"{type(exc).__name__}: {exc}"
        return AggregateError(f"aggregate {self.names[index]!r} ({aggregate.describe()}): {detail}")
