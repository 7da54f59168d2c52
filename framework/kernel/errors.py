"""The root of every exception the framework raises.

Each package (`router`, `balancer`, `state`, `sessionizer`, `framework`) has an
`errors.py` whose classes derive from `SessionizerError`, so a caller can catch
everything the framework raises with one `except`.  Where the standard type is
part of the contract (a bad value), the class is a `ValueError` as well
(`InvalidSetting`, `InvalidArgument`), so `except ValueError` still catches it.  This module imports
nothing, which lets every package depend on it without an import cycle.
"""

__all__ = [
    "AppError",
    "ClusterError",
    "ConfigError",
    "InvalidArgument",
    "InvalidSetting",
    "MemberError",
    "PortInUseError",
    "SessionizerError",
    "StreamError",
    "WrongType",
]


class SessionizerError(Exception):
    """Base class of every error raised by this project."""


class StreamError(SessionizerError):
    """An error about one stream: it carries `stream`, and its message starts `stream NAME: `.

    The packages' errors about one stream derive from it beside their own base class.
    """

    def __init__(self, stream: str, message: str) -> None:
        self.stream = stream
        super().__init__(f"stream {stream}: {message}")


class AppError(SessionizerError):
    """An error about one app (its name, streams or producers): it carries `app`."""

    def __init__(self, app: str, message: str) -> None:
        self.app = app
        super().__init__(message)


class MemberError(SessionizerError):
    """An error about one node (a member of the app's group): it carries `node`."""

    def __init__(self, node: str, message: str) -> None:
        self.node = node
        super().__init__(message)


class ConfigError(SessionizerError):
    """A setting is missing, malformed or inconsistent with the cluster."""


class InvalidSetting(ConfigError, ValueError):
    """A configuration object was built with a value out of range; the message names it.

    A `ValueError` too: rejecting a bad value is what callers (and argparse) expect.
    """


class InvalidArgument(SessionizerError, ValueError):
    """A function was called with a value outside what it accepts; the message says which.

    A `ValueError` too, the standard type for a bad value, which callers may catch.
    """


class WrongType(SessionizerError, TypeError):
    """A function was given a value of a type it does not take; the message says which.

    A `TypeError` too, the standard type for it, which callers may catch.
    """


class ClusterError(SessionizerError):
    """The local ZooKeeper/Kafka cluster could not be resolved, started or stopped."""


class PortInUseError(ClusterError):
    """A local server could not bind the port chosen for it: something took it meanwhile."""
