"""Real Apache ZooKeeper and Apache Kafka JVMs, started by the project for dev and tests."""

from framework.cluster.artifacts import Artifacts, resolve_artifacts
from framework.cluster.launcher import LocalCluster, running_cluster, stop_cluster_dir
from framework.cluster.netns import NetworkLab
from framework.cluster.process import wait_until

__all__ = [
    "Artifacts",
    "LocalCluster",
    "NetworkLab",
    "resolve_artifacts",
    "running_cluster",
    "stop_cluster_dir",
    "wait_until",
]
