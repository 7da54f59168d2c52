"""The consumer node runtime: one loop, one consumer, one engine per owned stream.

`Node` and `NodeConfig` are public as `framework.Node` and `framework.NodeConfig`
(docs/nodes.md), their one import path; this package exports nothing of its own.
"""

__all__: list[str] = []
