"""Configuration and health of one Apache ZooKeeper server (standalone or ensemble member)."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ZooKeeperNode", "four_letter_word", "zookeeper_mode"]

_MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


@dataclass(frozen=True)
class ZooKeeperNode:
    """One ZooKeeper server: its id, ports, directory and address."""

    server_id: int
    client_port: int
    quorum_port: int
    election_port: int
    directory: Path
    host: str = "127.0.0.1"  # clients, quorum and election all bind it
    super_digest: str | None = None
    """`user:<base64 sha1>` of a digest identity with all rights on every znode, or None."""

    @property
    def name(self) -> str:
        """The server's name in the cluster (`zk1`, `zk2`, ...)."""
        return f"zk{self.server_id}"

    @property
    def address(self) -> str:
        """host:port clients connect to."""
        return f"{self.host}:{self.client_port}"

    def write_config(self, ensemble: list[ZooKeeperNode]) -> Path:
        """Write zoo.cfg and myid; return the config path."""
        data_dir = self.directory / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        (data_dir / "myid").write_text(f"{self.server_id}\n")
        lines = [
            # A short tick lets tests use session timeouts of a few seconds;
            # the explicit bounds keep production-like timeouts allowed too.
            "tickTime=500",
            "initLimit=20",
            "syncLimit=10",
            "minSessionTimeout=1000",
            "maxSessionTimeout=60000",
            f"dataDir={data_dir}",
            f"clientPort={self.client_port}",
            f"clientPortAddress={self.host}",
            "admin.enableServer=false",
            "4lw.commands.whitelist=srvr,ruok,stat,mntr",
            "autopurge.purgeInterval=1",
        ]
        if self.super_digest is not None:
            # zoo.cfg keys ZooKeeper does not know become `zookeeper.<key>` system properties.
            lines.append(f"DigestAuthenticationProvider.superDigest={self.super_digest}")
        if len(ensemble) > 1:
            lines += [
                f"server.{n.server_id}={n.host}:{n.quorum_port}:{n.election_port}" for n in ensemble
            ]
        config = self.directory / "zoo.cfg"
        config.write_text("\n".join(lines) + "\n")
        return config

    def command(self, java: str, classpath: str, heap_mb: int) -> list[str]:
        """The JVM command line that runs this server."""
        return [
            java,
            f"-Xmx{heap_mb}m",
            "-XX:+UseSerialGC",
            "-Dzookeeper.jmx.log4j.disable=true",
            "-cp",
            classpath,
            _MAIN_CLASS,
            str(self.directory / "zoo.cfg"),
        ]


def four_letter_word(address: str, word: str, timeout: float = 2.0) -> str:
    """Send a ZooKeeper four-letter command and return the reply ('' on failure)."""
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as sock:
            sock.sendall(word.encode())
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
    except OSError:
        return ""
    return b"".join(chunks).decode(errors="replace")


def zookeeper_mode(address: str) -> str | None:
    """'standalone', 'leader' or 'follower' when the server serves, else None."""
    for line in four_letter_word(address, "srvr").splitlines():
        if line.startswith("Mode:"):
            return line.split(":", 1)[1].strip()
    return None
