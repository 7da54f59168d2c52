"""Public API: subclass `StreamProcessor`, run nodes.

Names are resolved lazily so that importing `framework.kernel.errors` from the other
packages never drags in the node runtime (and so that import has no side
effects but one: the filters of kafka-python's import-time DeprecationWarnings,
`framework.kafka_warnings`, installed here because every module that imports
kafka-python lives in a package that imports `framework` first).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from framework.kafka_warnings import ignore_kafka_import_warnings

if TYPE_CHECKING:  # what a type checker sees; at run time the names load lazily (below)
    from framework.kernel.config import ConnectionConfig
    from framework.kernel.errors import SessionizerError
    from framework.node.config import NodeConfig
    from framework.node.node import Node
    from sessionizer.processor import StreamProcessor

__all__ = ["ConnectionConfig", "Node", "NodeConfig", "SessionizerError", "StreamProcessor"]

ignore_kafka_import_warnings()

_EXPORTS = {
    "ConnectionConfig": "framework.kernel.config",
    "Node": "framework.node.node",
    "NodeConfig": "framework.node.config",
    "SessionizerError": "framework.kernel.errors",
    "StreamProcessor": "sessionizer.processor",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'framework' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
