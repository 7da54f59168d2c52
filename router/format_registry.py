"""The `Format` protocol, the built-in formats by name, and `load_format(NAME | MODULE:NAME)`.

A format turns one input line into a `ParsedFragment` (session key, event time,
fields) or rejects it with `MalformedLine(reason, detail)`.  The built-in
`apache`, `sshd` and `jsonl` are `Format` objects in `BUILTIN_FORMATS`; any
other format is loaded from `MODULE:NAME`, the same way `--processor` loads a
processor (docs/routing.md, "Input formats").
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType, ModuleType
from typing import Final, Literal, Protocol, TypeAlias, get_args, runtime_checkable

from router.errors import FormatError
from router.formats_apache import ApacheFormat
from router.formats_jsonl import JsonlFormat
from router.formats_sshd import SshdFormat
from router.fragment import ParsedFragment

__all__ = [
    "BUILTIN_FORMATS",
    "FORMATS",
    "BuiltinFormat",
    "Format",
    "FormatSpec",
    "FunctionFormat",
    "LineParser",
    "load_format",
]


@runtime_checkable
class Format(Protocol):
    """An input format: `parse` one line into a `ParsedFragment`, or reject it.

    `parse` gets the line without its line ending or a leading byte-order mark,
    and never a blank line (those are rejected as `empty` before it is called).
    It raises `router.MalformedLine(reason, detail)` to reject a line: the line
    is counted under `reason` (`"reasons"` in `produce --json`) and skipped.
    Any other exception is a bug in the format and stops the producer.
    """

    @property
    def name(self) -> str:
        """The format's name, as logs and error messages show it."""
        ...

    def parse(self, line: str) -> ParsedFragment:
        """The fragment `line` holds; raises `MalformedLine` for a line to skip."""
        ...


BuiltinFormat = Literal["apache", "sshd", "jsonl"]
FORMATS: Final[tuple[BuiltinFormat, ...]] = get_args(BuiltinFormat)
"""The names of the built-in formats, in the order the help text lists them."""

BUILTIN_FORMATS: Final[Mapping[str, Format]] = MappingProxyType(
    {"apache": ApacheFormat(), "sshd": SshdFormat(), "jsonl": JsonlFormat()}
)
"""The built-in formats by name (`sshd` dates classic syslog lines in DEFAULT_SYSLOG_YEAR)."""

FormatSpec: TypeAlias = Format | str
"""What `load_format` and the parse functions take: a `Format`, a built-in name or MODULE:NAME."""

LineParser: TypeAlias = Callable[[str], ParsedFragment]
"""A plain function from one line to its fragment (a `FunctionFormat` wraps one)."""


@dataclass(frozen=True)
class FunctionFormat:
    """A plain function `line -> ParsedFragment` as a `Format` (what `MODULE:function` loads)."""

    name: str
    function: LineParser

    def parse(self, line: str) -> ParsedFragment:
        """Call the function."""
        return self.function(line)


def load_format(spec: FormatSpec) -> Format:
    """The format `spec` names: a `Format` itself, a built-in name, or `MODULE:NAME`.

    `NAME` in `MODULE` may be a `Format` instance, a `Format` class (instantiated
    without arguments) or a plain function `line -> ParsedFragment`; an object
    given instead of a string is taken the same way.  Raises `FormatError` (a
    `ConfigError`) saying what is wrong and what to do.
    """
    if not isinstance(spec, str):
        return _as_format(spec, _label(spec))
    builtin = BUILTIN_FORMATS.get(spec)
    if builtin is not None:
        return builtin
    module_name, colon, attribute = spec.partition(":")
    if not colon:
        raise FormatError(
            f"unknown input format {spec!r}; use one of {', '.join(FORMATS)}, or MODULE:NAME "
            'for your own (docs/routing.md, "Input formats")'
        )
    if not module_name or not attribute:
        raise FormatError(f"input format {spec!r} is not MODULE:NAME (for example mymodule:CSV)")
    module = _import(module_name, spec)
    found = getattr(module, attribute, _MISSING)
    if found is _MISSING:
        where = getattr(module, "__file__", None) or module_name
        raise FormatError(
            f"input format {spec!r}: module {module_name!r} ({where}) has no attribute "
            f"{attribute!r}"
        )
    return _as_format(found, spec)


def _import(module_name: str, spec: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        raise FormatError(
            f"cannot import the module of input format {spec!r} ({exc}); is the directory "
            "that holds it on PYTHONPATH? (for example PYTHONPATH=. sessionizer produce ...)"
        ) from exc


def _as_format(found: object, spec: str) -> Format:
    """`found` (what MODULE:NAME names) as a Format: itself, an instance, or a wrapper."""
    if isinstance(found, type):
        return _checked(_instantiate(found, spec), spec)
    if isinstance(found, Format):
        return _checked(found, spec)
    if callable(found):
        return FunctionFormat(spec, found)
    raise FormatError(f"{spec} is {_a(found)}, {_NOT_A_FORMAT}")


def _instantiate(cls: type, spec: str) -> object:
    # `name` may be set by __init__; `parse` must be a method.
    if not callable(getattr(cls, "parse", None)):
        raise FormatError(f"{spec} is a class without a `parse(line)` method: {_NOT_A_FORMAT}")
    try:
        inspect.signature(cls).bind()
    except TypeError as exc:
        raise FormatError(
            f"format class {spec} cannot be created without arguments ({exc}); "
            "give its arguments defaults, or make MODULE:NAME an instance"
        ) from exc
    except ValueError:  # no signature to inspect (a C type): let the call itself tell
        pass
    return cls()


def _checked(candidate: object, spec: str) -> Format:
    if not isinstance(candidate, Format) or not callable(candidate.parse):
        raise FormatError(f"{spec} is {_a(candidate)}, {_NOT_A_FORMAT}")
    name = candidate.name
    if not isinstance(name, str) or not name:
        raise FormatError(f"format {spec} has name {name!r}; `name` must be a non-empty string")
    return candidate


def _label(value: object) -> str:
    """`MODULE:NAME` of a class or function, as if it had been loaded by that name."""
    module, name = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    return f"{module}:{name}" if isinstance(module, str) and isinstance(name, str) else repr(value)


def _a(value: object) -> str:
    kind = type(value).__name__
    return f"an {kind}" if kind[:1].lower() in "aeiou" else f"a {kind}"


_MISSING = object()
_NOT_A_FORMAT = (
    "not a format: give a Format (an object with `name` and `parse(line)` returning a "
    "ParsedFragment), a class of one, or a function line -> ParsedFragment"
)
