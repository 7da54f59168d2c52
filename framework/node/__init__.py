"""The consumer node runtime: one loop, one consumer, one engine per owned stream.

`Node` and `NodeConfig` are public as `framework.Node` and `framework.NodeConfig`
(docs/nodes.md), their one import path; this package exports nothing of its own.
"""

from framework.kernel.compiled import package_path

# SESSIONIZER_HOT_PATH=compiled: the mypyc build's modules of this package are found first
# (framework.kernel.compiled).
__path__ = package_path(__name__, __path__)

__all__: list[str] = []
