"""Load the user's `StreamProcessor` from a `module:Class` string, with clear errors."""

from __future__ import annotations

import importlib
from typing import Any

from framework.errors import ConfigError
from sessionizer.processor import StreamProcessor

__all__ = ["load_processor"]


def load_processor(spec: str) -> StreamProcessor[Any]:
    """Import `module:Class` and return an instance of it."""
    module_name, _, class_name = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(
            f"cannot import processor module {module_name!r} ({exc}); is it on PYTHONPATH?"
        ) from exc
    cls = getattr(module, class_name, None)
    if cls is None:
        raise ConfigError(f"module {module_name!r} has no class {class_name!r}")
    if not (isinstance(cls, type) and issubclass(cls, StreamProcessor)):
        raise ConfigError(f"{spec} is not a subclass of framework.StreamProcessor")
    try:
        return cls()
    except TypeError as exc:
        raise ConfigError(f"cannot instantiate {spec}: {exc}") from exc
