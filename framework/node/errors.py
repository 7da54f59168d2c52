"""Errors raised by the consumer node runtime."""

from __future__ import annotations

from framework.kernel.errors import MemberError, SessionizerError

__all__ = ["NodeCrashed", "NodeError"]


class NodeError(SessionizerError):
    """Base class of the errors raised by `framework.node`."""


class NodeCrashed(NodeError, MemberError):
    """The loop stopped on an unexpected exception; nothing was committed after it."""

    def __init__(self, node: str, error: BaseException) -> None:
        super().__init__(
            node,
            f"node {node} stopped on an unexpected error ({type(error).__name__}: {error}); "
            "it committed nothing after it and released its streams, which the other nodes "
            "resume from their last commit. The node log's `node_crashed` event has the "
            "traceback",
        )
