"""The pure parts of the partition lab and of the launcher's address options (no root needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework.cluster import LocalCluster
from framework.cluster.kafka_server import KafkaNode
from framework.cluster.netns import LabPlan, exec_prefix
from framework.cluster.zookeeper_server import ZooKeeperNode
from framework.kernel.errors import ClusterError

PLAN = LabPlan("ab12cd", ("n1", "n2", "n3"))


def test_names_and_addresses() -> None:
    assert PLAN.server == "sz-ab12cd-srv"
    assert PLAN.namespace("n2") == "sz-ab12cd-n2"
    assert PLAN.namespaces == ["sz-ab12cd-srv", "sz-ab12cd-n1", "sz-ab12cd-n2", "sz-ab12cd-n3"]
    assert (PLAN.zk_address, PLAN.kafka_address) == ("10.213.0.1", "10.213.0.2")
    assert [PLAN.address(n) for n in PLAN.nodes] == ["10.213.0.11", "10.213.0.12", "10.213.0.13"]
    assert PLAN.targets("both") == ["10.213.0.1", "10.213.0.2"]


def test_every_setup_command_acts_inside_a_namespace_of_the_lab() -> None:
    commands = PLAN.setup_commands()
    ours = set(PLAN.namespaces)
    for command in commands:
        assert command[0] == "ip"
        if command[1] == "netns":
            assert command[2] == "add" and command[3] in ours
        else:
            # `ip -n NS ...`: links, addresses and rules are never made in the caller's namespace.
            assert command[1] == "-n" and command[2] in ours, command
        if "veth" in command:
            assert command[-2:] == ["netns", command[-1]] and command[-1] in ours
    added = [c for c in commands if c[3:5] == ["addr", "add"]]
    assert {c[5] for c in added} == {
        "10.213.0.1/24", "10.213.0.2/24", "10.213.0.11/24", "10.213.0.12/24", "10.213.0.13/24",
    }  # fmt: skip
    # Each namespace exists before anything is done inside it.
    created: set[str] = set()
    for command in commands:
        if command[1:3] == ["netns", "add"]:
            created.add(command[3])
        else:
            assert command[2] in created


def test_a_cut_is_two_blackhole_rules_ahead_of_local_delivery_and_heal_deletes_them() -> None:
    add = PLAN.rule_commands("n2", PLAN.zk_address, "add")
    assert add == [
        ["ip", "-n", "sz-ab12cd-srv", "rule", "add", "pref", "10",
         "from", "10.213.0.12", "to", "10.213.0.1", "blackhole"],
        ["ip", "-n", "sz-ab12cd-srv", "rule", "add", "pref", "10",
         "from", "10.213.0.1", "to", "10.213.0.12", "blackhole"],
    ]  # fmt: skip
    delete = PLAN.rule_commands("n2", PLAN.zk_address, "del")
    assert [c[:4] + c[5:] for c in delete] == [c[:4] + c[5:] for c in add]
    setup = PLAN.setup_commands()
    moved = setup.index(["ip", "-n", PLAN.server, "rule", "add", "pref", "100", "lookup", "local"])
    assert setup[moved + 1] == [
        "ip",
        "-n",
        PLAN.server,
        "rule",
        "del",
        "pref",
        "0",
        "lookup",
        "local",
    ]


def test_teardown_deletes_every_namespace() -> None:
    deleted = [c[3] for c in PLAN.teardown_commands()]
    assert sorted(deleted) == sorted(PLAN.namespaces)


def test_exec_prefix() -> None:
    assert exec_prefix("sz-ab12cd-n1") == ["ip", "netns", "exec", "sz-ab12cd-n1"]
    assert exec_prefix(None) == []


@pytest.mark.parametrize(
    ("run_id", "nodes"),
    [("AB", ("n1",)), ("ab", ("n1", "n1")), ("ab", ("node-with-a-long-name",)), ("ab", ("1x",))],
)
def test_bad_plans_are_refused(run_id: str, nodes: tuple[str, ...]) -> None:
    with pytest.raises(ValueError):
        LabPlan(run_id, nodes)


def test_unknown_node_is_refused() -> None:
    with pytest.raises(ValueError, match="no node 'n9'"):
        PLAN.address("n9")


def test_servers_default_to_loopback(tmp_path: Path) -> None:
    kafka = KafkaNode(1, 9092, 9093, tmp_path / "kafka1")
    text = kafka.write_config([kafka]).read_text()
    assert "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093" in text
    assert "advertised.listeners=PLAINTEXT://127.0.0.1:9092" in text
    zk = ZooKeeperNode(1, 2181, 2888, 3888, tmp_path / "zk1")
    assert "clientPortAddress=127.0.0.1" in zk.write_config([zk]).read_text()
    cluster = LocalCluster(tmp_path / "cluster", zookeepers=1, brokers=1)
    assert cluster.zk_connect.startswith("127.0.0.1:") and cluster.bootstrap.startswith(
        "127.0.0.1:"
    )


def test_servers_on_other_addresses(tmp_path: Path) -> None:
    kafka = KafkaNode(2, 9092, 9093, tmp_path / "kafka2", "10.213.0.2")
    text = kafka.write_config([kafka]).read_text()
    assert "listeners=PLAINTEXT://10.213.0.2:9092,CONTROLLER://10.213.0.2:9093" in text
    assert "advertised.listeners=PLAINTEXT://10.213.0.2:9092" in text
    assert "controller.quorum.voters=2@10.213.0.2:9093" in text
    zk = ZooKeeperNode(1, 2181, 2888, 3888, tmp_path / "zk1", "10.213.0.1")
    other = ZooKeeperNode(2, 2182, 2889, 3889, tmp_path / "zk2", "10.213.0.1")
    text = zk.write_config([zk, other]).read_text()
    assert "clientPortAddress=10.213.0.1" in text and "server.2=10.213.0.1:2889:3889" in text
    assert zk.address == "10.213.0.1:2181"


def test_an_address_that_is_not_here_is_a_clear_error(tmp_path: Path) -> None:
    # 192.0.2.0/24 is TEST-NET-1: never assigned to this machine's interfaces.
    with pytest.raises(ClusterError, match=r"cannot bind 192\.0\.2\.7"):
        LocalCluster(tmp_path, host="192.0.2.7")


def test_a_missing_namespace_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ClusterError, match="no network namespace 'sz-nonexistent-srv'"):
        LocalCluster(tmp_path, netns="sz-nonexistent-srv")
