"""The conditions of a `DeclarativeProcessor`'s aggregates (`where=`): tests of a
fragment's fields, written with `sessionizer.declarative.field`.

Compiled on the hot path with the aggregates (`sessionizer.declarative_folds`); the
`.py` file is the reference.  A condition raises as Python would (KeyError for a
missing field, TypeError for values that do not compare); the plan that tests it
names the aggregate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from sessionizer.errors import AggregateError

__all__ = [
    "OPERATORS",
    "AllOf",
    "AnyOf",
    "Compare",
    "Condition",
    "EndsWith",
    "IsIn",
    "Not",
    "Present",
]

OPERATORS: Final = ("==", "!=", "<", "<=", ">", ">=")
"""The comparisons of `Compare`, by their index."""


class Condition:
    """A test of a fragment's fields: `where=` of an aggregate."""

    def holds(self, fragment: Mapping[str, Any]) -> bool:
        """Return True if the fragment passes; raise KeyError/TypeError as Python would."""
        raise NotImplementedError

    def describe(self) -> str:
        """The condition as written with `sessionizer.declarative.field`."""
        raise NotImplementedError

    def __and__(self, other: Condition) -> Condition:
        return AllOf([self, other])

    def __or__(self, other: Condition) -> Condition:
        return AnyOf([self, other])

    def __invert__(self) -> Condition:
        return Not(self)

    def __repr__(self) -> str:
        return self.describe()


class Compare(Condition):
    """`field(name) <op> operand`, by Python's comparison of the two."""

    def __init__(self, name: str, op: int, operand: Any) -> None:
        self.name = name
        self.op = op
        self.operand = operand

    def holds(self, fragment: Mapping[str, Any]) -> bool:
        value = fragment[self.name]
        op = self.op
        if op == 0:
            return bool(value == self.operand)
        if op == 1:
            return bool(value != self.operand)
        if op == 2:
            return bool(value < self.operand)
        if op == 3:
            return bool(value <= self.operand)
        if op == 4:
            return bool(value > self.operand)
        return bool(value >= self.operand)

    def describe(self) -> str:
        return f"field({self.name!r}) {OPERATORS[self.op]} {self.operand!r}"


class IsIn(Condition):
    """`field(name).is_in(values)`: the value equals one of `values`."""

    def __init__(self, name: str, values: frozenset[Any]) -> None:
        self.name = name
        self.values = values

    def holds(self, fragment: Mapping[str, Any]) -> bool:
        return fragment[self.name] in self.values

    def describe(self) -> str:
        return f"field({self.name!r}).is_in({sorted(map(repr, self.values))})"


class EndsWith(Condition):
    """`field(name).ends_with(suffixes, ...)`: a string value ends with one of `suffixes`.

    `cut_at`: only the part before its first occurrence counts (a URL's query);
    `ignore_case`: compared lowercased (the suffixes are lowercased once, here).
    """

    def __init__(
        self, name: str, suffixes: tuple[str, ...], ignore_case: bool, cut_at: str | None
    ) -> None:
        self.name = name
        self.suffixes = tuple(s.lower() for s in suffixes) if ignore_case else suffixes
        self.ignore_case = ignore_case
        self.cut_at = cut_at

    def holds(self, fragment: Mapping[str, Any]) -> bool:
        value = fragment[self.name]
        if not isinstance(value, str):
            raise AggregateError(f"ends_with takes strings, got a {type(value).__name__}")
        text: str = value
        if self.cut_at is not None:
            cut = text.find(self.cut_at)
            if cut >= 0:
                text = text[:cut]
        if self.ignore_case:
            text = text.lower()
        return text.endswith(self.suffixes)

    def describe(self) -> str:
        return (
            f"field({self.name!r}).ends_with({list(self.suffixes)!r}, "
            f"ignore_case={self.ignore_case}, cut_at={self.cut_at!r})"
        )


class Present(Condition):
    """`field(name).present()`: the fragment has the field (a guard for `&`)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def holds(self, fragment: Mapping[str, Any]) -> bool:
        return self.name in fragment

    def describe(self) -> str:
        return f"field({self.name!r}).present()"


class AllOf(Condition):
    """`a & b`: every part holds, tested left to right until one does not."""

    def __init__(self, parts: list[Condition]) -> None:
        self.parts = parts

    def holds(self, fragment: Mapping[str, Any]) -> bool:
        return all(part.holds(fragment) for part in self.parts)

    def describe(self) -> str:
        return "(" + " & ".join(part.describe() for part in self.parts) + ")"


class AnyOf(Condition):
    """`a | b`: some part holds, tested left to right until one does."""

    def __init__(self, parts: list[Condition]) -> None:
        self.parts = parts

    def holds(self, fragment: Mapping[str, Any]) -> bool:
        return any(part.holds(fragment) for part in self.parts)

    def describe(self) -> str:
        return "(" + " | ".join(part.describe() for part in self.parts) + ")"


class Not(Condition):
    """`~a`: the part does not hold."""

    def __init__(self, part: Condition) -> None:
        self.part = part

    def holds(self, fragment: Mapping[str, Any]) -> bool:
        return not self.part.holds(fragment)

    def describe(self) -> str:
        return "~" + self.part.describe()
