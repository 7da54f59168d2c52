"""The root of every exception the framework raises.

Each package (`router`, `balancer`, `state`, `sessionizer`, `framework`) has an
`errors.py` whose classes derive from `SessionizerError`, so a caller can catch
everything the framework raises with one `except`.  This module imports
nothing, which lets every package depend on it without an import cycle.
"""

__all__ = ["ClusterError", "ConfigError", "PortInUseError", "SessionizerError"]


class SessionizerError(Exception):
    """Base class of every error raised by this project."""


class ConfigError(SessionizerError):
    """A setting is missing, malformed or inconsistent with the cluster."""


class ClusterError(SessionizerError):
    """The local ZooKeeper/Kafka cluster could not be resolved, started or stopped."""


class PortInUseError(ClusterError):
    """A local server could not bind the port chosen for it: something took it meanwhile."""
