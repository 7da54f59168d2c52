"""`DeclarativeProcessor`: a session defined by aggregates over fragment fields, which
the engine folds without calling Python per fragment.

    class Visits(DeclarativeProcessor):
        timeout = 30 * 60
        aggregates = {
            "requests": count(),
            "bytes": sum_of("bytes"),
            "errors": count(where=field("status") >= 400),
            "landing_page": first("path", where=field("status") < 400),
        }

        def finish(self, key, result):            # optional, once per session
            result["bounce"] = result["requests"] <= 1
            return result

A session's result has each aggregate under its name, in the order written, then what
`finish` makes of it.  The per-fragment work (sessionizer.declarative_folds and _conditions) is part
of the compiled hot path; docs/sessions.md, "Declarative processors", has the rules.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from sessionizer.declarative_conditions import Compare, Condition, EndsWith, IsIn, Present
from sessionizer.declarative_folds import (
    Aggregate,
    Count,
    Distinct,
    First,
    Last,
    Max,
    Min,
    Plan,
    Sum,
)
from sessionizer.errors import ProcessorError
from sessionizer.processor import StreamProcessor

__all__ = [
    "DeclarativeProcessor",
    "Field",
    "count",
    "distinct",
    "field",
    "first",
    "last",
    "max_of",
    "min_of",
    "sum_of",
]


class Field:
    """A fragment field in a condition: `field("status") >= 400`, `field("path").present()`."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = _field_name(name)

    def __eq__(self, operand: object) -> Condition:  # type: ignore[override]
        return Compare(self.name, 0, operand)

    def __ne__(self, operand: object) -> Condition:  # type: ignore[override]
        return Compare(self.name, 1, operand)

    def __lt__(self, operand: object) -> Condition:
        return Compare(self.name, 2, operand)

    def __le__(self, operand: object) -> Condition:
        return Compare(self.name, 3, operand)

    def __gt__(self, operand: object) -> Condition:
        return Compare(self.name, 4, operand)

    def __ge__(self, operand: object) -> Condition:
        return Compare(self.name, 5, operand)

    __hash__ = None  # type: ignore[assignment]  # == builds a condition

    def is_in(self, values: Iterable[Any]) -> Condition:
        """The value equals one of `values` (hashable)."""
        try:
            return IsIn(self.name, frozenset(values))
        except TypeError as exc:
            raise ProcessorError(f"field({self.name!r}).is_in: {exc}") from exc

    def ends_with(
        self, suffixes: Iterable[str], *, ignore_case: bool = False, cut_at: str | None = None
    ) -> Condition:
        """The value, a string, ends with one of `suffixes`; before `cut_at` when given."""
        ends = tuple(suffixes)
        if not ends or not all(isinstance(end, str) and end for end in ends):
            raise ProcessorError(
                f"field({self.name!r}).ends_with takes non-empty strings, got {ends!r}"
            )
        if cut_at is not None and not (isinstance(cut_at, str) and cut_at):
            raise ProcessorError(f"field({self.name!r}).ends_with: cut_at must be a string")
        return EndsWith(self.name, ends, bool(ignore_case), cut_at)

    def present(self) -> Condition:
        """The fragment has the field: guards a condition on it, `present() & (... )`."""
        return Present(self.name)


def field(name: str) -> Field:
    """A fragment field, to write an aggregate's `where=` condition."""
    return Field(name)


def count(*, where: Condition | None = None) -> Aggregate:
    """How many of the session's fragments pass `where` (all of them without it)."""
    return Count(None, _where("count", where))


def sum_of(name: str, *, where: Condition | None = None) -> Aggregate:
    """The sum of a numeric field (int or float; a bool or string is an error)."""
    return Sum(_field_name(name), _where("sum_of", where))


def min_of(name: str, *, where: Condition | None = None) -> Aggregate:
    """The least value of a field, by Python's `<` (None when no fragment passed)."""
    return Min(_field_name(name), _where("min_of", where))


def max_of(name: str, *, where: Condition | None = None) -> Aggregate:
    """The greatest value of a field, by Python's `>` (None when no fragment passed)."""
    return Max(_field_name(name), _where("max_of", where))


def first(name: str, *, where: Condition | None = None) -> Aggregate:
    """The first value of a field that is not None, in event-time order."""
    return First(_field_name(name), _where("first", where))


def last(name: str, *, where: Condition | None = None) -> Aggregate:
    """The last value of a field that is not None, in event-time order."""
    return Last(_field_name(name), _where("last", where))


def distinct(name: str, *, where: Condition | None = None) -> Aggregate:
    """How many different values a field took (the values are held while the session is open)."""
    return Distinct(_field_name(name), _where("distinct", where))


class DeclarativeProcessor(StreamProcessor[list[Any]]):
    """A processor whose sessions are `aggregates` over fields; `finish` shapes the result.

    Subclasses set `aggregates` (result name → `count()`, `sum_of(...)`, ...) and the
    time attributes of `StreamProcessor`; `timestamp` and `is_end` may be overridden
    too (they are called per fragment).  Without a `version` of its own, a subclass's
    handover identity includes a digest of its aggregates, so changing them makes the
    next owner replay rather than read slots of another shape.
    """

    aggregates: ClassVar[Mapping[str, Aggregate]] = {}
    _plan: ClassVar[Plan]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._plan = _plan_of(cls)
        if "version" not in cls.__dict__:
            described = "\n".join(f"{n}={a.describe()}" for n, a in cls.aggregates.items())
            digest = hashlib.sha256(described.encode()).hexdigest()[:12]
            setattr(cls, "version", f"aggregates-{digest}")  # noqa: B010  # not declared above

    def open(self, key: str, fragment: Mapping[str, Any]) -> list[Any]:
        """A session with every aggregate at its start (the engine folds the fragment next)."""
        return self._plan.start()

    def update(self, session: list[Any], fragment: Mapping[str, Any]) -> None:
        """Fold one fragment into every aggregate whose `where` it passes."""
        self._plan.fold(session, fragment)

    def close(self, key: str, session: list[Any]) -> Mapping[str, Any]:
        """The aggregates' results by name, passed through `finish`."""
        return self.finish(key, self._plan.results(session))

    def finish(self, key: str, result: dict[str, Any]) -> Mapping[str, Any]:
        """Shape a finished session's result (default: as it is); called once per session."""
        return result

    def dump_session(self, session: list[Any]) -> Any:
        """The session's slots as msgpack-able data, for a handover."""
        return self._plan.dump(session)

    def load_session(self, data: Any) -> list[Any]:
        """Rebuild a session's slots from `dump_session`'s data."""
        return self._plan.load(data)


def _plan_of(cls: type[DeclarativeProcessor]) -> Plan:
    owner = f"{cls.__qualname__}.aggregates"
    aggregates = cls.aggregates
    if not isinstance(aggregates, Mapping) or not aggregates:
        raise ProcessorError(
            f"{owner} must be a non-empty dict of result name to aggregate "
            f"(count(), sum_of('bytes'), ...), got {aggregates!r:.100}"
        )
    for name, aggregate in aggregates.items():
        if not isinstance(name, str) or not name:
            raise ProcessorError(f"{owner}: result names are non-empty strings, got {name!r}")
        if not isinstance(aggregate, Aggregate):
            raise ProcessorError(
                f"{owner}[{name!r}] is {aggregate!r:.100}, not an aggregate: "
                "use count(), sum_of(), min_of(), max_of(), first(), last() or distinct()"
            )
    return Plan(list(aggregates), list(aggregates.values()))


def _field_name(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise ProcessorError(f"a field name is a non-empty string, got {name!r}")
    return name


def _where(kind: str, where: object) -> Condition | None:
    if where is not None and not isinstance(where, Condition):
        raise ProcessorError(
            f"{kind}(where=...) takes a condition such as field('status') >= 400, "
            f"got {where!r:.100}"
        )
    return where
