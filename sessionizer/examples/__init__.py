"""Built-in example processors: `WebSessions` (Apache access logs), `SshConnections` (sshd)."""

from __future__ import annotations

from sessionizer.examples.sshd import SshConnections
from sessionizer.examples.weblog import WebSessions

__all__ = ["SshConnections", "WebSessions"]
