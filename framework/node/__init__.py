"""The consumer node runtime: one loop, one consumer, one engine per owned stream."""

from framework.node.config import NodeConfig
from framework.node.node import Node

__all__ = ["Node", "NodeConfig"]
