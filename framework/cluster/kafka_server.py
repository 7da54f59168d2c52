"""Configuration and health of one Apache Kafka server in KRaft mode."""

from __future__ import annotations

import base64
import socket
import subprocess
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from framework.kernel.errors import ClusterError

if TYPE_CHECKING:
    from framework.cluster.security import ClusterSecurity

__all__ = ["KafkaNode", "broker_ids_serving", "new_cluster_id"]

_LOG4J2 = """\
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
"""


def new_cluster_id() -> str:
    """A KRaft cluster id: a random UUID in URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass(frozen=True)
class KafkaNode:
    """One combined broker+controller node: its id, ports, directory and address."""

    node_id: int
    port: int
    controller_port: int
    directory: Path
    host: str = "127.0.0.1"  # both listeners bind it, and it is advertised
    security: ClusterSecurity | None = None  # the client listener is then SASL_SSL (SCRAM)

    @property
    def name(self) -> str:
        """The server's name in the cluster (`kafka1`, ...)."""
        return f"kafka{self.node_id}"

    @property
    def address(self) -> str:
        """host:port of the PLAINTEXT listener."""
        return f"{self.host}:{self.port}"

    def write_config(self, quorum: list[KafkaNode]) -> Path:
        """Write server.properties and the log4j2 config; return the properties path."""
        self.directory.mkdir(parents=True, exist_ok=True)
        replicas = min(3, len(quorum))
        voters = ",".join(f"{n.node_id}@{n.host}:{n.controller_port}" for n in quorum)
        lines = [
            # Every node is broker and controller, so 3 nodes keep a controller
            # quorum when one of them is killed.
            "process.roles=broker,controller",
            f"node.id={self.node_id}",
            f"controller.quorum.voters={voters}",
            f"listeners=PLAINTEXT://{self.host}:{self.port},"
            f"CONTROLLER://{self.host}:{self.controller_port}",
            f"advertised.listeners=PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name=PLAINTEXT",
            f"log.dirs={self.directory / 'data'}",
            "num.partitions=1",
            f"default.replication.factor={replicas}",
            f"offsets.topic.replication.factor={replicas}",
            f"transaction.state.log.replication.factor={replicas}",
            "transaction.state.log.min.isr=1",
            # With 3 replicas, acks=all then survives one broker down without loss.
            f"min.insync.replicas={2 if replicas == 3 else 1}",
            "unclean.leader.election.enable=false",
            "auto.create.topics.enable=false",
            "group.initial.rebalance.delay.ms=0",
            "num.network.threads=2",
            "num.io.threads=2",
            "log.segment.bytes=67108864",
        ]
        if self.security is not None:
            lines = self.security.secure_server_properties(
                lines, self.host, self.port, self.controller_port
            )
        config = self.directory / "server.properties"
        config.write_text("\n".join(lines) + "\n")
        if self.security is not None:
            config.chmod(0o600)  # it holds the store passwords and the broker's SCRAM login
        (self.directory / "log4j2.properties").write_text(_LOG4J2)
        return config

    def _jvm(self, java: str, classpath: str, heap_mb: int) -> list[str]:
        return [
            java,
            f"-Xmx{heap_mb}m",
            "-Xms64m",
            "-XX:+UseSerialGC",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.directory / 'log4j2.properties'}",
            "-cp",
            classpath,
        ]

    def format_storage(self, java: str, classpath: str, cluster_id: str) -> None:
        """Format the node's log directory for KRaft (once, before first start)."""
        if (self.directory / "data" / "meta.properties").exists():
            return
        command = [
            *self._jvm(java, classpath, 256),
            "kafka.tools.StorageTool",
            "format",
            # `=` form: a base64 id may start with '-', which would read as a flag.
            f"--cluster-id={cluster_id}",
            "-c",
            str(self.directory / "server.properties"),
            # SCRAM users must exist before the broker serves: created at format time.
            *(self.security.scram_arguments() if self.security is not None else []),
        ]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise ClusterError(
                f"formatting Kafka storage for {self.name} failed: "
                f"{(result.stdout + result.stderr).strip()[-2000:]}"
            )

    def command(self, java: str, classpath: str, heap_mb: int) -> list[str]:
        """The JVM command line that runs this node."""
        return [
            *self._jvm(java, classpath, heap_mb),
            "kafka.Kafka",
            str(self.directory / "server.properties"),
        ]


def _listening(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=1.0):
            return True
    except OSError:
        return False


def broker_ids_serving(bootstrap: str, properties: Mapping[str, str] | None = None) -> set[int]:
    """Ids of the brokers the cluster metadata reports as serving (empty on failure).

    `properties` are client properties (standard names) for a secured listener.
    """
    # imported late: slow, and only needed here
    from framework.kafka.admin import admin_client
    from framework.kafka.errors import ClientError

    # A cheap TCP check first: kafka-python logs a warning per refused connection,
    # which would flood the output while a broker boots.
    if not any(_listening(address) for address in bootstrap.split(",")):
        return set()
    try:
        admin = admin_client(
            bootstrap, properties, request_timeout_ms=5000, client_id="sessionizer-probe"
        )
    except (ClientError, OSError, ValueError):
        return set()
    try:
        described = admin.describe_cluster()
        return {b["broker_id"] for b in described["brokers"] if not b.get("is_fenced")}
    except (ClientError, OSError):
        return set()
    finally:
        admin.close()
