"""`LocalCluster`: real ZooKeeper and Kafka JVMs on free ports, for dev and tests.

By default every server listens on the loopback interface of the current
network namespace.  For partition tests the servers can listen on other
addresses and run inside a named network namespace (`host`, `kafka_host`,
`netns`; see `framework.cluster.netns`).  A broker counts as started once it
serves and gives idempotent producers their ids (`framework.kafka.producer_ids`).
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from pathlib import Path
from typing import Literal

import structlog

from framework.cluster.artifacts import Artifacts, resolve_artifacts
from framework.cluster.kafka_server import KafkaNode, broker_ids_serving, new_cluster_id
from framework.cluster.netns import exec_prefix, inside, namespace_exists
from framework.cluster.process import (
    ServerProcess,
    check_started,
    free_ports,
    java,
    retry_taken_ports,
    running_state,
    stop_recorded,
    stop_together,
    wait_until,
    write_state,
)
from framework.cluster.security import ClusterSecurity
from framework.cluster.zookeeper_server import ZooKeeperNode, zookeeper_mode
from framework.kernel.errors import ClusterError
from framework.kernel.lifecycle import Lifecycle

__all__ = ["STATE_FILE", "LocalCluster", "running_cluster", "stop_cluster_dir"]

STATE_FILE = "cluster.json"
_log = structlog.get_logger("sessionizer.cluster")


class LocalCluster(Lifecycle):
    """ZooKeeper (1 or 3 servers) and Kafka KRaft (0, 1 or 3 nodes) under one directory.

    Use as a context manager; every server it started is stopped on exit, also
    on error.  `kill`, `stop`, `start`, `restart`, `pause` and `resume` act on
    one named server (`zk1`.., `kafka1`..) for fault tests.

    `host` is the address every server binds and advertises (default loopback);
    `kafka_host` gives Kafka its own address (default: `host`), so a client can
    be cut from ZooKeeper and not from Kafka.  With `netns` the JVMs run inside
    that existing network namespace (`ip netns exec`), and the launcher's own
    readiness probes run in it too; the addresses must belong to it.

    With `secure` Kafka's client listener is SASL_SSL (SCRAM-SHA-512, a CA and
    broker certificate made by `keytool`) and ZooKeeper knows a super digest
    identity; `client_properties`, `kafka_config_path` and `zk_auth` say how
    clients connect (`framework.cluster.security`).
    """

    def __init__(
        self,
        directory: Path | str,
        *,
        zookeepers: Literal[1, 3] = 1,
        brokers: Literal[0, 1, 3] = 1,
        zk_heap_mb: int = 128,
        kafka_heap_mb: int = 384,
        ready_timeout: float = 120.0,
        die_with_parent: bool = True,
        artifacts: Artifacts | None = None,
        host: str = "127.0.0.1",
        kafka_host: str | None = None,
        netns: str | None = None,
        secure: bool = False,
    ) -> None:
        if zookeepers not in (1, 3) or brokers not in (0, 1, 3):
            raise ClusterError(f"unsupported shape zookeepers={zookeepers} brokers={brokers}")
        if netns is not None and not namespace_exists(netns):
            raise ClusterError(f"no network namespace {netns!r} (create it with `ip netns add`)")
        self.directory = Path(directory).resolve()
        self.host = host
        self.kafka_host = kafka_host or host
        self.netns = netns
        self._artifacts = artifacts
        self._heaps = {"zookeeper": zk_heap_mb, "kafka": kafka_heap_mb}
        self._ready_timeout = ready_timeout
        self._die_with_parent = die_with_parent
        self._zookeepers, self._kafkas = self._place(zookeepers, brokers)
        self._processes: dict[str, ServerProcess] = {}
        self.secure = secure
        self.security: ClusterSecurity | None = None  # made by `up` when secure

    # -- whole cluster ---------------------------------------------------------------

    @property
    def zk_connect(self) -> str:
        """ZooKeeper connection string (all servers)."""
        return ",".join(node.address for node in self._zookeepers)

    @property
    def bootstrap(self) -> str:
        """Kafka bootstrap servers ('' when the cluster has no brokers)."""
        return ",".join(node.address for node in self._kafkas)

    @property
    def client_properties(self) -> dict[str, str]:
        """Kafka client properties (standard names) clients need; empty when not secure."""
        return {} if self.security is None else self.security.client_properties

    @property
    def kafka_config_path(self) -> Path | None:
        """The client properties file for `--kafka-config` (None when not secure)."""
        return None if self.security is None else self.security.client_properties_path

    @property
    def zk_auth(self) -> str | None:
        """The app's ZooKeeper identity for `--zk-auth` (None when not secure)."""
        return None if self.security is None else self.security.zk_auth

    @property
    def server_names(self) -> list[str]:
        """Names of all servers, ZooKeeper first."""
        return [n.name for n in self._zookeepers] + [n.name for n in self._kafkas]

    def up(self) -> LocalCluster:
        """Resolve jars, write configs, start every server and wait until all serve.

        A server that finds its port taken (by another process since the port
        was chosen) makes the whole cluster start again on new ports, up to
        PORT_ATTEMPTS times; addresses are final only once `up` returns.
        """
        artifacts = self._artifacts or resolve_artifacts()
        java_path = java()
        if self.secure and self.security is None:
            self.security = ClusterSecurity.create(self.directory, [self.host, self.kafka_host])
        retry_taken_ports(
            lambda: self._start(artifacts, java_path), "cluster_port_taken", self._replace
        )
        self._write_state()
        _log.info(
            "cluster_up", zk=self.zk_connect, bootstrap=self.bootstrap, dir=str(self.directory)
        )
        return self

    def _replace(self) -> None:
        """The same servers on new ports."""
        self._zookeepers, self._kafkas = self._place(len(self._zookeepers), len(self._kafkas))

    def _place(self, zookeepers: int, brokers: int) -> tuple[list[ZooKeeperNode], list[KafkaNode]]:
        """Servers on newly chosen, distinct free ports (chosen where the servers will run)."""
        try:
            with inside(self.netns):
                zk_ports = iter(free_ports(3 * zookeepers, self.host))
                kafka_ports = iter(free_ports(2 * brokers, self.kafka_host))
        except OSError as exc:
            where = f"network namespace {self.netns}" if self.netns else "this network namespace"
            raise ClusterError(
                f"cannot bind {self.host} / {self.kafka_host} in {where} ({exc}); "
                "the servers' addresses must belong to where they run"
            ) from exc
        return (
            [
                ZooKeeperNode(
                    i,
                    next(zk_ports),
                    next(zk_ports),
                    next(zk_ports),
                    self.directory / f"zk{i}",
                    self.host,
                )
                for i in range(1, zookeepers + 1)
            ],
            [
                KafkaNode(
                    i,
                    next(kafka_ports),
                    next(kafka_ports),
                    self.directory / f"kafka{i}",
                    self.kafka_host,
                )
                for i in range(1, brokers + 1)
            ],
        )

    def _start(self, artifacts: Artifacts, java: str) -> None:
        """One attempt of `up`: fresh directories, every server started and serving."""
        for child in ("zk1", "zk2", "zk3", "kafka1", "kafka2", "kafka3"):
            shutil.rmtree(self.directory / child, ignore_errors=True)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._processes = {}
        if self.security is not None:
            self._zookeepers = [
                dataclasses.replace(z, super_digest=self.security.zk_super_digest)
                for z in self._zookeepers
            ]
            self._kafkas = [dataclasses.replace(k, security=self.security) for k in self._kafkas]
        for zk in self._zookeepers:
            zk.write_config(self._zookeepers)
            classpath = artifacts.classpath("zookeeper")
            self._add(zk.name, zk.command(java, classpath, self._heaps["zookeeper"]), zk.directory)
        cluster_id = new_cluster_id()
        for node in self._kafkas:
            node.write_config(self._kafkas)
            node.format_storage(java, artifacts.classpath("kafka"), cluster_id)
            classpath = artifacts.classpath("kafka")
            self._add(
                node.name, node.command(java, classpath, self._heaps["kafka"]), node.directory
            )
        try:
            for process in self._processes.values():
                process.start()
            for name in self.server_names:
                self._wait_serving(name)
        except BaseException:
            self.down()
            raise

    def down(self) -> None:
        """Stop every server: all Kafka nodes together, then ZooKeeper."""
        kafkas = [self._processes[n.name] for n in self._kafkas if n.name in self._processes]
        zookeepers = [
            self._processes[n.name] for n in self._zookeepers if n.name in self._processes
        ]
        stop_together(kafkas)
        stop_together(zookeepers)
        (self.directory / STATE_FILE).unlink(missing_ok=True)

    def _open(self) -> None:
        self.up()

    def _close(self) -> None:
        self.down()

    # -- one server, for fault tests ------------------------------------------------------

    def process(self, name: str) -> ServerProcess:
        """The process of one named server."""
        try:
            return self._processes[name]
        except KeyError:
            raise ClusterError(f"no server {name!r}; servers are {self.server_names}") from None

    def kill(self, name: str) -> None:
        """SIGKILL one server, as a crash would."""
        self.process(name).kill()

    def stop(self, name: str) -> None:
        """Stop one server cleanly."""
        self.process(name).stop()

    def start(self, name: str) -> None:
        """Start one stopped server again and wait until it serves."""
        self.process(name).start()
        self._wait_serving(name)

    def restart(self, name: str) -> None:
        """Stop, then start one server."""
        self.stop(name)
        self.start(name)

    def pause(self, name: str) -> None:
        """SIGSTOP one server."""
        self.process(name).pause()

    def resume(self, name: str) -> None:
        """SIGCONT one paused server."""
        self.process(name).resume()

    def zk_leader(self) -> str | None:
        """Name of the ZooKeeper server that is leader (or standalone), if any."""
        for zk in self._zookeepers:
            if not self._processes[zk.name].running():
                continue
            with inside(self.netns):
                mode = zookeeper_mode(zk.address)
            if mode in ("leader", "standalone"):
                return zk.name
        return None

    # -- internals --------------------------------------------------------------------

    def _add(self, name: str, command: list[str], directory: Path) -> None:
        self._processes[name] = ServerProcess(
            name,
            [*exec_prefix(self.netns), *command],  # `ip netns exec` execs the JVM: same pid
            directory / "server.log",
            die_with_parent=self._die_with_parent,
        )

    def _wait_serving(self, name: str) -> None:
        process = self.process(name)

        def serving() -> bool:
            check_started(process)
            # The probes connect from where the servers run, so an address that is
            # reachable only inside `netns` is checked there.
            with inside(self.netns):
                if name.startswith("zk"):
                    node = next(z for z in self._zookeepers if z.name == name)
                    return zookeeper_mode(node.address) is not None
                kafka = next(k for k in self._kafkas if k.name == name)
                return kafka.node_id in broker_ids_serving(kafka.address, self.client_properties)

        began = time.monotonic()
        wait_until(serving, self._ready_timeout, f"{name} to serve", interval=0.25)
        if not name.startswith("zk"):
            self._wait_producer_ids(name, self._ready_timeout - (time.monotonic() - began))

    def _wait_producer_ids(self, name: str, timeout: float) -> None:
        """Until the broker gives producer ids: the first producer then gets one at once,
        rather than a "coordinator load in progress" warning and a retry."""
        # imported late: only a cluster being started needs the client
        from framework.kafka.producer_ids import producer_id_refusal

        kafka = next(k for k in self._kafkas if k.name == name)
        with inside(self.netns):
            refusal = producer_id_refusal(kafka.address, self.client_properties, max(timeout, 1.0))
        if refusal is not None:
            raise ClusterError(
                f"{name} serves but gave no producer id within {timeout:.0f}s ({refusal}); "
                f"its log is {self.process(name).log_path}"
            )

    def _write_state(self) -> None:
        write_state(
            self.directory / STATE_FILE,
            self._processes,
            zk_connect=self.zk_connect,
            bootstrap=self.bootstrap,
            netns=self.netns,
            secure=self.security is not None,  # its material: <dir>/security
        )


def running_cluster(directory: Path | str) -> dict[str, str] | None:
    """Connection strings of a cluster `up` left running in `directory`, if all of it runs."""
    state = running_state(Path(directory) / STATE_FILE)
    if state is None:
        return None
    return {"zk_connect": state["zk_connect"], "bootstrap": state["bootstrap"]}


def stop_cluster_dir(directory: Path | str) -> list[str]:
    """Stop the servers recorded in `directory` by `cluster up`; return their names."""
    return stop_recorded(Path(directory) / STATE_FILE)
