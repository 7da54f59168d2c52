"""Load the user's `StreamProcessor` from a `module:Class` string, with clear errors.

A failure while importing the user's module is one line naming the file and line
(a syntax error, an exception at import time) or the module that is missing; only
a processor module that cannot be found at all is blamed on PYTHONPATH.
"""

from __future__ import annotations

import importlib
import os
import traceback
from pathlib import Path
from typing import Any

from framework.kernel.errors import ConfigError
from sessionizer.processor import StreamProcessor

__all__ = ["load_processor"]


def load_processor(spec: str) -> StreamProcessor[Any]:
    """Import `module:Class` and return an instance of it."""
    module_name, _, class_name = spec.partition(":")
    module = _import(module_name)
    cls = getattr(module, class_name, None)
    if cls is None:
        raise ConfigError(f"module {module_name!r} has no class {class_name!r}")
    if not (isinstance(cls, type) and issubclass(cls, StreamProcessor)):
        raise ConfigError(f"{spec} is not a subclass of framework.StreamProcessor")
    try:
        return cls()
    except TypeError as exc:
        if _where(exc) != _ABSENT:  # raised inside the user's __init__, not by the call itself
            raise _raised(spec, exc) from exc
        raise ConfigError(f"cannot instantiate {spec}: {exc}") from exc
    except Exception as exc:  # the user's __init__ failed: one line, not a traceback
        raise _raised(spec, exc) from exc


def _raised(spec: str, exc: Exception) -> ConfigError:
    return ConfigError(
        f"processor {spec} raised {type(exc).__name__} at {_where(exc)} while being created: {exc}"
    )


def _import(module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except SyntaxError as exc:  # also IndentationError, TabError
        raise ConfigError(
            f"processor module {module_name!r} has a syntax error at "
            f"{exc.filename}:{exc.lineno}: {exc.msg}"
        ) from exc
    except ImportError as exc:
        if _is_the_module_itself(module_name, exc):
            raise ConfigError(
                f"cannot import processor module {module_name!r} (no module named "
                f"{exc.name!r}); is it on PYTHONPATH?"
            ) from exc
        raise ConfigError(
            f"processor module {module_name!r} failed at {_where(exc)}: {exc}; "
            "install what it imports in this environment"
        ) from exc
    except Exception as exc:  # any error of the module's own code at import time
        raise ConfigError(
            f"processor module {module_name!r} raised {type(exc).__name__} at "
            f"{_where(exc)} while being imported: {exc}"
        ) from exc


def _is_the_module_itself(module_name: str, exc: ImportError) -> bool:
    """The processor module (or a package above it) was not found, rather than an import
    inside it failing."""
    if not isinstance(exc, ModuleNotFoundError) or exc.name is None:
        return False
    return module_name == exc.name or module_name.startswith(exc.name + ".")


_ABSENT = "import time"
_PROJECT = tuple(
    f"{Path(__file__).resolve().parents[2] / package}{os.sep}"
    for package in ("framework", "router", "balancer", "state", "sessionizer")
)


def _where(exc: BaseException) -> str:
    """`file:line` of the innermost frame of the user's code: not importlib's machinery, nor
    the project's own checks of the user's class (they run in its `class` statement)."""
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith("<frozen") and f.filename != __file__
    ]
    theirs = [f for f in frames if not f.filename.startswith(_PROJECT)] or frames
    return f"{theirs[-1].filename}:{theirs[-1].lineno}" if theirs else _ABSENT
