"""The fixtures of the `framework.testing` plugin: real ZooKeeper and Kafka servers, an app name.

Servers are chosen as the package's docstring says; `provide_servers` is the
same choice outside pytest.
"""

from __future__ import annotations

import os
import signal
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Literal, NoReturn

import pytest
from kazoo.client import KazooClient

from framework.cluster.launcher import LocalCluster

__all__ = ["Servers", "provide_servers"]

ServerSource = Literal["environment", "testcontainers", "local"]
_ZOOKEEPER_IMAGE = "zookeeper:3.9.5"
_KAFKA_IMAGE = "apache/kafka:4.1.1"


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM stops a run as Ctrl-C does, so every fixture's teardown runs: the servers'
    directories, nodes and network namespaces go too (a SIGTERM would otherwise end the
    process where it stands).  A handler someone else set is left alone."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _stop_as_interrupted)


def _stop_as_interrupted(signum: int, _frame: FrameType | None) -> NoReturn:
    raise KeyboardInterrupt(f"stopped by signal {signal.Signals(signum).name}")


@dataclass(frozen=True)
class Servers:
    """Connection strings of the servers the tests use, and where they came from."""

    zk_connect: str
    bootstrap: str
    source: ServerSource


def _docker_answers() -> bool:
    try:
        import docker  # installed with testcontainers

        client = docker.from_env(timeout=3)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # any failure at all means "no usable engine"
        return False


@contextmanager
def _containers() -> Iterator[Servers]:
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.waiting_utils import wait_for_logs
    from testcontainers.kafka import KafkaContainer

    with ExitStack() as stack:
        zookeeper = stack.enter_context(DockerContainer(_ZOOKEEPER_IMAGE).with_exposed_ports(2181))
        wait_for_logs(zookeeper, "binding to port", timeout=120)
        kafka = stack.enter_context(KafkaContainer(_KAFKA_IMAGE).with_kraft())
        zk_connect = f"{zookeeper.get_container_host_ip()}:{zookeeper.get_exposed_port(2181)}"
        yield Servers(zk_connect, kafka.get_bootstrap_server(), "testcontainers")


@contextmanager
def provide_servers(directory: Path) -> Iterator[Servers]:
    """Yield servers for a test session, in the order the module docstring gives."""
    zk_connect = os.environ.get("SESSIONIZER_ZK")
    bootstrap = os.environ.get("SESSIONIZER_BOOTSTRAP")
    if zk_connect and bootstrap:
        yield Servers(zk_connect, bootstrap, "environment")
    elif _docker_answers():
        with _containers() as servers:
            yield servers
    else:
        with LocalCluster(directory, zookeepers=1, brokers=1) as cluster:
            yield Servers(cluster.zk_connect, cluster.bootstrap, "local")


@pytest.fixture(scope="session")
def sessionizer_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """ZooKeeper and Kafka shared by the whole test session."""
    with provide_servers(tmp_path_factory.mktemp("cluster")) as servers:
        yield servers


@pytest.fixture
def zk_hosts(sessionizer_servers: Servers) -> str:
    """ZooKeeper connection string."""
    return sessionizer_servers.zk_connect


@pytest.fixture
def kafka_bootstrap(sessionizer_servers: Servers) -> str:
    """Kafka bootstrap servers."""
    return sessionizer_servers.bootstrap


@pytest.fixture
def zk(zk_hosts: str) -> Iterator[KazooClient]:
    """A started kazoo client of the test servers' ZooKeeper, stopped after the test."""
    client = KazooClient(hosts=zk_hosts, timeout=10.0)
    client.start(timeout=30)
    yield client
    client.stop()
    client.close()


@pytest.fixture
def app() -> str:
    """A fresh app name, so this test's topics and znodes are its own."""
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture
def local_cluster() -> Iterator[Callable[..., LocalCluster]]:
    """Factory for dedicated clusters (e.g. 3 brokers to kill one); all stopped at test end.

    `local_cluster(secure=True)` starts Kafka with a SASL_SSL listener and gives
    the clients' settings as `cluster.client_properties`, `cluster.kafka_config_path`
    and `cluster.zk_auth` (`framework.cluster.security`).
    """
    with ExitStack() as stack:
        base = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="sessionizer-")))

        def make(
            *, zookeepers: Literal[1, 3] = 1, brokers: Literal[0, 1, 3] = 1, secure: bool = False
        ) -> LocalCluster:
            directory = base / f"cluster{len(list(base.iterdir()))}"
            return stack.enter_context(
                LocalCluster(directory, zookeepers=zookeepers, brokers=brokers, secure=secure)
            )

        yield make


@pytest.fixture
def zk_ensemble(local_cluster: Callable[..., LocalCluster]) -> LocalCluster:
    """A fresh 3-server ZooKeeper ensemble without Kafka."""
    return local_cluster(zookeepers=3, brokers=0)
