"""Offline checks of deploy/: the Dockerfile, the compose file, the Kubernetes manifests,
the Prometheus configuration and the Grafana dashboard.

Nothing here starts a server, a container or a cluster. The tests parse every YAML
file, check the invariants the files promise (pinned images, resources, probes,
ConfigMap keys, quorum sizes, replication settings, the real CLI's flags, the metrics
port and the probe paths against the node's real HTTP endpoint, the dashboard's
metric names against what a node serves), and run the offline validators that are
installed: kubernetes-validate (Kubernetes JSON schemas, strict), check-jsonschema
(the Compose specification's schema), `kubectl kustomize`, `docker compose config`
and `promtool`. A missing validator is a skip that names what is missing, never a
silent pass.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip(
    "yaml", reason="PyYAML is not installed: add `pyyaml` to the test extras in pyproject.toml"
)

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DOCKERFILE = DEPLOY / "Dockerfile"
COMPOSE = DEPLOY / "compose" / "compose.yaml"
K8S = DEPLOY / "k8s"
README = DEPLOY / "README.md"
SERVICE_MONITOR = K8S / "servicemonitor.yaml"
PROMETHEUS_CONFIG = DEPLOY / "prometheus" / "prometheus.yml"
GRAFANA = DEPLOY / "grafana"
DASHBOARD = GRAFANA / "sessionizer-node.json"

SESSIONIZER_IMAGE = "sessionizer"
CONNECTION_VARIABLES = ("SESSIONIZER_ZK", "SESSIONIZER_BOOTSTRAP", "SESSIONIZER_APP")
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "Job", "CronJob")
# What a node needs after --drain: the last commit, closing its clients, a slow disk.
SHUTDOWN_MARGIN_SECONDS = 20
# The oldest Kubernetes the manifests claim to support (deploy/README.md).
OLDEST_KUBERNETES = "1.27.0"
# Manifests in deploy/k8s that `kubectl apply -k` leaves out on purpose: a custom
# resource whose CRD a cluster may not have (deploy/README.md).
OUTSIDE_KUSTOMIZATION = {"servicemonitor.yaml"}
NODE_DEPLOYMENT = "sessionizer-node"
METRICS_SERVICE = "sessionizer-node-metrics"


# -- loading ---------------------------------------------------------------------------


def _load_all(path: Path) -> list[Any]:
    with path.open(encoding="utf-8") as handle:
        return [doc for doc in yaml.safe_load_all(handle) if doc is not None]


@functools.cache
def _kustomization() -> dict[str, Any]:
    (doc,) = _load_all(K8S / "kustomization.yaml")
    return doc


@functools.cache
def _manifests() -> tuple[tuple[str, dict[str, Any]], ...]:
    """(file name, object) for every Kubernetes object, in kustomization order."""
    return tuple(
        (name, doc) for name in _kustomization()["resources"] for doc in _load_all(K8S / name)
    )


@functools.cache
def _compose() -> dict[str, Any]:
    (doc,) = _load_all(COMPOSE)
    return doc


def _objects(kind: str) -> list[dict[str, Any]]:
    return [doc for _, doc in _manifests() if doc["kind"] == kind]


def _one(kind: str, name: str) -> dict[str, Any]:
    found = [doc for doc in _objects(kind) if doc["metadata"]["name"] == name]
    assert len(found) == 1, f"expected exactly one {kind} {name!r}, found {len(found)}"
    return found[0]


def _pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    if workload["kind"] == "CronJob":
        return workload["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return workload["spec"]["template"]["spec"]


def _workloads() -> list[dict[str, Any]]:
    return [doc for _, doc in _manifests() if doc["kind"] in WORKLOAD_KINDS]


def _containers() -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(workload, container) for every container and init container."""
    for workload in _workloads():
        spec = _pod_spec(workload)
        for container in [*spec.get("initContainers", []), *spec["containers"]]:
            yield workload, container


def _env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["name"]: entry for entry in container.get("env", [])}


def _env_value(container: dict[str, Any], name: str) -> str:
    entry = _env(container).get(name)
    assert entry is not None and "value" in entry, f"{container['name']}: no literal {name}"
    return str(entry["value"])


def _image_name(image: str) -> str:
    return image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image


def _is_sessionizer(image: str) -> bool:
    return _image_name(image).rsplit("/", 1)[-1] == SESSIONIZER_IMAGE


def _services(prefix: str) -> dict[str, dict[str, Any]]:
    return {n: s for n, s in _compose()["services"].items() if re.fullmatch(rf"{prefix}-\d+", n)}


def _duration_seconds(text: str) -> float:
    """A Compose duration (`1m30s`, `60s`, `500ms`) in seconds."""
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6}
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)", str(text))
    assert parts and "".join(n + u for n, u in parts) == str(text), f"bad duration {text!r}"
    return sum(float(n) * units[u] for n, u in parts)


def _compose_default(text: str) -> str:
    """A Compose value with each `${NAME:-default}` replaced by its default."""
    return re.sub(r"\$\{[A-Z_][A-Z0-9_]*:-([^}]*)\}", r"\1", str(text))


def _compose_sessionizer_env() -> dict[str, str]:
    env = _compose()["x-sessionizer"]["environment"]
    return {name: _compose_default(value) for name, value in env.items()}


def _kubernetes_expand(text: str, defined: dict[str, str]) -> str:
    """Kubernetes' `$(VAR)` expansion of command/args: `$$` escapes, unknown refs stay."""
    out, i = [], 0
    while i < len(text):
        if text[i] != "$" or i + 1 == len(text):
            out.append(text[i])
            i += 1
        elif text[i + 1] == "$":
            out.append("$")
            i += 2
        elif text[i + 1] == "(" and (end := text.find(")", i + 2)) != -1:
            name = text[i + 2 : end]
            out.append(defined.get(name, text[i : end + 1]))
            i = end + 1
        else:
            out.append(text[i : i + 2])
            i += 2
    return "".join(out)


def _zoo_servers(value: str) -> dict[int, tuple[str, int, int, int]]:
    """`server.N=host:quorum:election;client ...` as {N: (host, quorum, election, client)}."""
    servers = {}
    for entry in value.split():
        match = re.fullmatch(r"server\.(\d+)=([^:]+):(\d+):(\d+);(\d+)", entry)
        assert match, f"unexpected ZOO_SERVERS entry {entry!r}"
        sid, host, quorum, election, client = match.groups()
        assert int(sid) not in servers, f"server.{sid} listed twice"
        servers[int(sid)] = (host, int(quorum), int(election), int(client))
    return servers


def _voters(value: str) -> dict[int, tuple[str, int]]:
    """`controller.quorum.voters` as {node id: (host, port)}."""
    voters = {}
    for entry in value.split(","):
        match = re.fullmatch(r"(\d+)@([^:]+):(\d+)", entry.strip())
        assert match, f"unexpected voter {entry!r}"
        voters[int(match[1])] = (match[2], int(match[3]))
    return voters


# -- every file ------------------------------------------------------------------------


def test_every_yaml_file_under_deploy_parses() -> None:
    files = sorted([*DEPLOY.rglob("*.yaml"), *DEPLOY.rglob("*.yml")])
    assert COMPOSE in files and K8S / "kustomization.yaml" in files
    for path in files:
        docs = _load_all(path)
        assert docs, f"{path} has no YAML document"
        assert all(isinstance(doc, dict) for doc in docs), f"{path}: a document is not a map"


def test_kustomization_lists_exactly_the_manifests() -> None:
    listed = _kustomization()["resources"]
    present = sorted(
        p.name
        for p in K8S.glob("*.yaml")
        if p.name != "kustomization.yaml" and p.name not in OUTSIDE_KUSTOMIZATION
    )
    assert sorted(listed) == present, "kustomization.yaml resources != the files in deploy/k8s"
    for name in OUTSIDE_KUSTOMIZATION:
        assert (K8S / name).is_file(), f"deploy/k8s/{name} is missing"
        assert name not in listed, f"{name} needs a CRD; keep it out of kustomization.yaml"
    assert len(listed) == len(set(listed))
    names = [(doc["kind"], doc["metadata"]["name"]) for _, doc in _manifests()]
    assert len(names) == len(set(names)), "two objects share a kind and name"
    for file, doc in _manifests():
        assert doc.get("apiVersion") and doc.get("kind"), f"{file}: object without apiVersion/kind"


def test_images_are_pinned_to_a_version() -> None:
    # Prometheus tags its images `v3.5.0`: a leading `v` is still a version.
    version_tag = re.compile(r"v?\d+(\.\d+)+(-[A-Za-z0-9.]+)*")
    images = [(f"k8s {w['metadata']['name']}", c["image"]) for w, c in _containers()]
    images += [(f"compose {n}", s["image"]) for n, s in _compose()["services"].items()]
    images += [
        ("Dockerfile", line.split()[1])
        for line in DOCKERFILE.read_text().splitlines()
        if line.startswith("FROM ")
    ]
    images += [
        ("kustomization", f"{i.get('newName', i['name'])}:{i['newTag']}")
        for i in _kustomization().get("images", [])
    ]
    for where, image in images:
        tag = image.rsplit(":", 1)[-1] if ":" in image.rsplit("/", 1)[-1] else ""
        assert tag and tag != "latest", f"{where}: image {image!r} is not pinned"
        assert version_tag.fullmatch(tag), f"{where}: {image!r} tag is not a version"


def test_every_workload_container_has_resources() -> None:
    for workload, container in _containers():
        where = f"{workload['kind']} {workload['metadata']['name']}/{container['name']}"
        resources = container.get("resources", {})
        assert {"cpu", "memory"} <= set(resources.get("requests", {})), f"{where}: requests"
        assert "memory" in resources.get("limits", {}), f"{where}: no memory limit"
    for name, service in _compose()["services"].items():
        limits = service.get("deploy", {}).get("resources", {}).get("limits", {})
        assert "memory" in limits, f"compose {name}: no deploy.resources.limits.memory"


# -- Kubernetes ------------------------------------------------------------------------


def test_configmap_key_references_exist() -> None:
    configmaps = {cm["metadata"]["name"]: cm.get("data", {}) for cm in _objects("ConfigMap")}
    for workload, container in _containers():
        where = f"{workload['metadata']['name']}/{container['name']}"
        for entry in container.get("env", []):
            ref = entry.get("valueFrom", {}).get("configMapKeyRef")
            if ref:
                assert ref["name"] in configmaps, f"{where}: no ConfigMap {ref['name']!r}"
                assert ref["key"] in configmaps[ref["name"]], f"{where}: no key {ref['key']!r}"
        for source in container.get("envFrom", []):
            if "configMapRef" in source:
                assert source["configMapRef"]["name"] in configmaps, f"{where}: envFrom"
        if _is_sessionizer(container["image"]):
            env = _env(container)
            for variable in CONNECTION_VARIABLES:
                ref = env.get(variable, {}).get("valueFrom", {}).get("configMapKeyRef")
                assert ref, f"{where}: {variable} does not come from the ConfigMap"


def test_services_and_budgets_select_their_pods() -> None:
    pod_labels = [
        _pod_spec_labels(w) for w in _workloads() if w["kind"] in ("Deployment", "StatefulSet")
    ]
    for service in _objects("Service"):
        selector = service["spec"]["selector"]
        assert any(selector.items() <= labels.items() for labels in pod_labels), service
    for budget in _objects("PodDisruptionBudget"):
        selector = budget["spec"]["selector"]["matchLabels"]
        assert any(selector.items() <= labels.items() for labels in pod_labels), budget
    for workload in _workloads():
        if workload["kind"] in ("Deployment", "StatefulSet"):
            selector = workload["spec"]["selector"]["matchLabels"]
            assert selector.items() <= _pod_spec_labels(workload).items(), workload["kind"]


def _pod_spec_labels(workload: dict[str, Any]) -> dict[str, str]:
    return workload["spec"]["template"]["metadata"]["labels"]


def _headless_service_of(statefulset: dict[str, Any]) -> dict[str, Any]:
    service = _one("Service", statefulset["spec"]["serviceName"])
    assert service["spec"]["clusterIP"] == "None", "the StatefulSet's Service must be headless"
    # Peers resolve each other before any is ready (a quorum comes first).
    assert service["spec"].get("publishNotReadyAddresses") is True
    assert statefulset["spec"]["podManagementPolicy"] == "Parallel"
    return service


def test_zookeeper_ensemble_matches_the_replica_count() -> None:
    statefulset = _one("StatefulSet", "zookeeper")
    replicas = statefulset["spec"]["replicas"]
    assert replicas % 2 == 1 and replicas >= 3
    headless = _headless_service_of(statefulset)["metadata"]["name"]
    (container,) = _pod_spec(statefulset)["containers"]
    servers = _zoo_servers(_env_value(container, "ZOO_SERVERS"))
    assert sorted(servers) == list(range(1, replicas + 1))
    for sid, (host, *_) in servers.items():
        assert host == f"{statefulset['metadata']['name']}-{sid - 1}.{headless}", host
    # myid is the pod ordinal + 1, computed at start from the pod name.
    script = " ".join(container["command"])
    assert "ZOO_MY_ID=$(( ${HOSTNAME##*-} + 1 ))" in script
    budget = _one("PodDisruptionBudget", "zookeeper")["spec"]
    assert budget["maxUnavailable"] <= (replicas - 1) // 2, "a drain could break the quorum"
    client_ports = {client for *_, client in servers.values()}
    expected = [f"zookeeper-{i}.{headless}:{p}" for i in range(replicas) for p in client_ports]
    zk = _one("ConfigMap", "sessionizer")["data"]["SESSIONIZER_ZK"]
    assert zk.split(",") == expected, "SESSIONIZER_ZK must list every ensemble member"


def test_kafka_quorum_matches_the_replica_count() -> None:
    statefulset = _one("StatefulSet", "kafka")
    replicas = statefulset["spec"]["replicas"]
    headless = _headless_service_of(statefulset)["metadata"]["name"]
    (container,) = _pod_spec(statefulset)["containers"]
    assert _env_value(container, "KAFKA_PROCESS_ROLES") == "broker,controller"
    voters = _voters(_env_value(container, "KAFKA_CONTROLLER_QUORUM_VOTERS"))
    assert sorted(voters) == list(range(replicas)), "one voter per replica, id = ordinal"
    listeners = dict(
        item.split("://") for item in _env_value(container, "KAFKA_LISTENERS").split(",")
    )
    controller_port = int(listeners["CONTROLLER"].rsplit(":", 1)[1])
    broker_port = int(listeners["PLAINTEXT"].rsplit(":", 1)[1])
    for node_id, (host, port) in voters.items():
        assert (host, port) == (f"kafka-{node_id}.{headless}", controller_port)
    script = " ".join(container["command"])
    assert "KAFKA_NODE_ID=${HOSTNAME##*-}" in script
    assert f"PLAINTEXT://${{HOSTNAME}}.{headless}:{broker_port}" in script
    expected = [f"kafka-{i}.{headless}:{broker_port}" for i in range(replicas)]
    bootstrap = _one("ConfigMap", "sessionizer")["data"]["SESSIONIZER_BOOTSTRAP"]
    assert bootstrap.split(",") == expected, "SESSIONIZER_BOOTSTRAP must list every broker"


def _check_replication(settings: dict[str, str], brokers: int, stream_replication: int) -> None:
    min_isr = int(settings["KAFKA_MIN_INSYNC_REPLICAS"])
    assert brokers == 3
    assert min_isr == 2
    for key in (
        "KAFKA_DEFAULT_REPLICATION_FACTOR",
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
    ):
        factor = int(settings[key])
        # acks=all must keep working with one broker down: min ISR < factor <= brokers.
        assert min_isr < factor <= brokers, f"{key}={factor} with min ISR {min_isr}"
    txn_isr = int(settings["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"])
    assert txn_isr < int(settings["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"])
    assert min_isr < stream_replication <= brokers, "streams create --replication"
    assert settings["KAFKA_UNCLEAN_LEADER_ELECTION_ENABLE"] == "false"
    assert settings["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"


def _option(argv: list[str], flag: str) -> str:
    assert flag in argv, f"{flag} missing from {argv}"
    return argv[argv.index(flag) + 1]


def test_kafka_replication_is_consistent_with_three_brokers_in_kubernetes() -> None:
    statefulset = _one("StatefulSet", "kafka")
    (container,) = _pod_spec(statefulset)["containers"]
    settings = {e["name"]: str(e["value"]) for e in container["env"] if "value" in e}
    (job_container,) = _pod_spec(_one("Job", "streams-create"))["containers"]
    replication = int(_option(job_container["args"], "--replication"))
    _check_replication(settings, statefulset["spec"]["replicas"], replication)


def test_kubernetes_probes_where_promised() -> None:
    for name in ("zookeeper", "kafka"):
        (container,) = _pod_spec(_one("StatefulSet", name))["containers"]
        assert "readinessProbe" in container and "livenessProbe" in container, name
    (zookeeper,) = _pod_spec(_one("StatefulSet", "zookeeper"))["containers"]
    probe = " ".join(zookeeper["readinessProbe"]["exec"]["command"])
    allowed = _env_value(zookeeper, "ZOO_4LW_COMMANDS_WHITELIST").split(",")
    assert "echo srvr" in probe and "srvr" in allowed, "the probe's 4lw must be whitelisted"
    # The nodes: HTTP probes on the metrics port (test_node_probes_* below).
    deployment = _one("Deployment", NODE_DEPLOYMENT)
    (node,) = _pod_spec(deployment)["containers"]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert "httpGet" in node[probe], f"the node's {probe} must ask its HTTP endpoint"
    assert "preStop" not in node.get("lifecycle", {}), "SIGTERM is handled; no preStop"
    assert deployment["spec"]["minReadySeconds"] > 0
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def test_node_grace_period_covers_the_drain() -> None:
    deployment = _one("Deployment", NODE_DEPLOYMENT)
    (node,) = _pod_spec(deployment)["containers"]
    drain = float(_option(node["args"], "--drain"))
    grace = _pod_spec(deployment)["terminationGracePeriodSeconds"]
    assert grace >= drain + SHUTDOWN_MARGIN_SECONDS, f"grace {grace}s < drain {drain}s + margin"
    # The node cuts its own shutdown short after the drain plus its shutdown deadline
    # (session timeout + 5 s, exit 3); the kubelet's SIGKILL must come later still.
    config = _node_config(node["args"])
    deadline = (config.drain_seconds or 0.0) + config.shutdown_deadline
    assert grace > deadline, f"grace {grace}s <= the node's own deadline {deadline}s"


def test_pods_run_as_the_image_user() -> None:
    dockerfile_user = re.search(r"^USER (\d+)", DOCKERFILE.read_text(), re.MULTILINE)
    assert dockerfile_user, "the Dockerfile must switch to a numeric user"
    for workload in _workloads():
        if all(_is_sessionizer(c["image"]) for c in _pod_spec(workload)["containers"]):
            context = _pod_spec(workload)["securityContext"]
            assert context["runAsNonRoot"] is True, workload["metadata"]["name"]
            assert str(context["runAsUser"]) == dockerfile_user[1], workload["metadata"]["name"]


# -- Compose ---------------------------------------------------------------------------


def test_compose_references_existing_services_and_volumes() -> None:
    compose = _compose()
    services = compose["services"]
    declared_volumes = set(compose.get("volumes") or {})
    for name, service in services.items():
        depends = service.get("depends_on", {})
        for dependency in depends if isinstance(depends, list) else depends.keys():
            assert dependency in services, f"{name} depends on unknown service {dependency!r}"
            assert dependency != name
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0] if isinstance(volume, str) else volume["source"]
            if not source.startswith((".", "/", "~")):
                assert source in declared_volumes, f"{name}: undeclared volume {source!r}"
        build = service.get("build")
        if build:
            context = (COMPOSE.parent / build["context"]).resolve()
            assert (context / build["dockerfile"]).resolve() == DOCKERFILE.resolve(), name
        assert service.get("stop_signal") == "SIGTERM", f"compose {name}: stop_signal"
        if _is_sessionizer(service["image"]):
            missing = set(CONNECTION_VARIABLES) - set(service.get("environment", {}))
            assert not missing, f"compose {name}: no {sorted(missing)}"


def test_compose_zookeeper_ensemble_and_kafka_quorum() -> None:
    zookeepers = _services("zookeeper")
    brokers = _services("kafka")
    assert len(zookeepers) == 3 and len(brokers) == 3
    ensembles = {
        name: _zoo_servers(service["environment"]["ZOO_SERVERS"])
        for name, service in zookeepers.items()
    }
    servers = next(iter(ensembles.values()))
    assert all(e == servers for e in ensembles.values()), "ZOO_SERVERS differs between servers"
    ids = {sid: host for sid, (host, *_) in servers.items()}
    assert sorted(ids.values()) == sorted(zookeepers), "ZOO_SERVERS != the zookeeper services"
    for name, service in zookeepers.items():
        assert ids[int(service["environment"]["ZOO_MY_ID"])] == name, f"{name}: wrong myid"
        allowed = service["environment"]["ZOO_4LW_COMMANDS_WHITELIST"].split(",")
        assert "echo srvr" in " ".join(service["healthcheck"]["test"]) and "srvr" in allowed
    node_ids = {}
    for name, service in brokers.items():
        env = {k: str(v) for k, v in service["environment"].items()}
        voters = _voters(env["KAFKA_CONTROLLER_QUORUM_VOTERS"])
        assert sorted(host for host, _ in voters.values()) == sorted(brokers), name
        assert voters[int(env["KAFKA_NODE_ID"])][0] == name, f"{name}: node id is not its voter"
        assert env["KAFKA_ADVERTISED_LISTENERS"] == f"PLAINTEXT://{name}:9092"
        assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
        assert "healthcheck" in service, name
        node_ids[name] = int(env["KAFKA_NODE_ID"])
    assert len(set(node_ids.values())) == len(brokers)
    sessionizer_env = _compose_sessionizer_env()
    assert sessionizer_env["SESSIONIZER_ZK"].split(",") == [
        f"{n}:2181" for n in sorted(ids.values())
    ]
    assert sessionizer_env["SESSIONIZER_BOOTSTRAP"].split(",") == [f"{n}:9092" for n in brokers]


def test_compose_kafka_replication_is_consistent_with_three_brokers() -> None:
    brokers = _services("kafka")
    for service in brokers.values():
        settings = {k: str(v) for k, v in service["environment"].items()}
        replication = int(_option(_compose()["services"]["streams"]["command"], "--replication"))
        _check_replication(settings, len(brokers), replication)


def test_compose_nodes_scale_and_stop_gracefully() -> None:
    services = _compose()["services"]
    node = services["node"]
    assert node["deploy"]["replicas"] >= 1
    assert "container_name" not in node, "a fixed container name prevents replicas"
    drain = float(_option(node["command"], "--drain"))
    grace = _duration_seconds(node["stop_grace_period"])
    assert grace >= drain + SHUTDOWN_MARGIN_SECONDS, f"stop_grace_period {grace}s too short"
    assert node["depends_on"]["streams"]["condition"] == "service_completed_successfully"
    config = _node_config(node["command"])
    deadline = (config.drain_seconds or 0.0) + config.shutdown_deadline
    assert grace > deadline, f"stop_grace_period {grace}s <= the node's own deadline {deadline}s"
    for name in services["streams"]["depends_on"]:
        assert services[name].get("healthcheck"), f"streams waits on {name} without a check"


# -- the command lines against the real CLI --------------------------------------------


def _sessionizer_command_lines() -> list[tuple[str, list[str], dict[str, str]]]:
    """(where, argv after `sessionizer`, the variables Kubernetes defines for it)."""
    lines = []
    for workload, container in _containers():
        if _is_sessionizer(container["image"]):
            assert "command" not in container, "keep the image's entrypoint (tini + sessionizer)"
            defined = {name: f"<{name}>" for name in _env(container)}
            lines.append((f"k8s {workload['metadata']['name']}", container["args"], defined))
    for name, service in _compose()["services"].items():
        if _is_sessionizer(service["image"]):
            assert isinstance(service["command"], list), f"compose {name}: use the list form"
            lines.append((f"compose {name}", service["command"], {}))
    return lines


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommand parsers of `parser` by name (none for a leaf command)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


@pytest.mark.parametrize(
    ("where", "argv", "defined"),
    _sessionizer_command_lines(),
    ids=[where for where, _, _ in _sessionizer_command_lines()],
)
def test_command_line_is_accepted_by_the_real_cli(
    where: str,
    argv: list[str],
    defined: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from framework.cli import build_parser
    from framework.commands.options import connection_from_args
    from framework.node.config import NodeConfig
    from framework.node.loader import load_processor

    for variable in [v for v in os.environ if v.startswith("SESSIONIZER_")]:
        monkeypatch.delenv(variable)  # defaults must not come from this machine
    if argv[0] == "node":  # the deployments name the processor in the environment
        monkeypatch.setenv("SESSIONIZER_PROCESSOR", _configured_processor())
    expanded = [_kubernetes_expand(str(arg), defined) for arg in argv]
    unresolved = [arg for arg in expanded if "$(" in arg]
    assert not unresolved, f"{where}: undefined variable in {unresolved}"
    parser = build_parser()
    assert argv[0] in _subcommands(parser), f"{where}: no `sessionizer {argv[0]}` command"
    # argparse accepts unambiguous prefixes (--avail for --available-now); the files
    # must spell every flag out, so a renamed flag cannot slip through as a prefix.
    leaf = parser
    for token in expanded:
        leaf = _subcommands(leaf).get(token, leaf)
    for token in expanded:
        if token.startswith("--"):
            flag = token.split("=", 1)[0]
            assert flag in leaf._option_string_actions, f"{where}: {flag} is not a flag"
    try:
        args = parser.parse_args(
            [*expanded, "--zk", "zk:2181", "--bootstrap", "kafka:9092", "--app", "sessionizer"]
        )
    except SystemExit:
        pytest.fail(f"{where}: `sessionizer {' '.join(expanded)}` rejected: {capsys.readouterr()}")
    connection = connection_from_args(args)
    if args.command == "node":
        config = NodeConfig(
            connection=connection,
            processor=args.processor,
            node_id=args.id or "test",
            drain_seconds=args.drain,
        )
        load_processor(config.processor)  # the module and class exist and instantiate


def test_configured_app_names_are_valid() -> None:
    from framework.kernel.names import validate_app

    validate_app(_one("ConfigMap", "sessionizer")["data"]["SESSIONIZER_APP"])
    validate_app(_compose_sessionizer_env()["SESSIONIZER_APP"])


def test_shell_commands_survive_kubernetes_expansion() -> None:
    # Kubernetes expands `$(VAR)` in command and args; the servers' shell scripts must
    # reach bash unchanged (`$(( ... ))` is shell arithmetic, not a variable).
    for workload, container in _containers():
        if _is_sessionizer(container["image"]):
            continue
        defined = {name: f"<{name}>" for name in _env(container)}
        for text in [*container.get("command", []), *container.get("args", [])]:
            assert _kubernetes_expand(text, defined) == text, workload["metadata"]["name"]


# -- the image -------------------------------------------------------------------------


def test_dockerfile_builds_the_cli_image() -> None:
    text = DOCKERFILE.read_text()
    froms = re.findall(r"^FROM (\S+)", text, re.MULTILINE)
    assert froms and froms[0].startswith("python:3.11-slim"), froms
    assert re.search(r"openjdk-\d+-jre-headless", text), "aggregate needs a JRE"
    entrypoint = re.search(r"^ENTRYPOINT (\[.*\])$", text, re.MULTILINE)
    assert entrypoint, "ENTRYPOINT must use the exec form"
    assert yaml.safe_load(entrypoint[1])[-1] == "sessionizer"
    copies = [line.split()[1:] for line in text.splitlines() if line.startswith("COPY ")]
    sources = {src for *srcs, _ in copies for src in srcs if not src.startswith("--")}
    include = re.search(r"include = \[(.*?)\]", (ROOT / "pyproject.toml").read_text())
    assert include, "pyproject.toml: no [tool.setuptools.packages.find] include"
    packages = {name.strip(' "*') for name in include[1].split(",")}
    assert packages <= sources, "the image must copy every package pyproject installs"
    kept = (DEPLOY / "Dockerfile.dockerignore").read_text().split()
    for source in sources:
        assert (ROOT / source).exists(), f"COPY {source}: no such path"
        assert f"!{source}" in kept, f"Dockerfile.dockerignore keeps {source} out of the build"
    # `aggregate` finds Spark's Kafka source jars through the pom and a cache baked in.
    pom = re.search(r"^COPY deploy/local/pom.xml (\S+)$", text, re.MULTILINE)
    assert pom and f"SESSIONIZER_POM={pom[1]}" in text
    assert "SESSIONIZER_CACHE=" in text and "python -m framework.cluster.artifacts" in text


def test_readme_says_what_was_validated() -> None:
    text = README.read_text()
    assert "## What was validated here and what was not" in text
    assert "test_deploy_manifests.py" in text


# -- validators that ship their schemas --------------------------------------------------


def _kubernetes_versions() -> list[str]:
    if importlib.util.find_spec("kubernetes_validate") is None:
        return [OLDEST_KUBERNETES]
    import kubernetes_validate

    return [OLDEST_KUBERNETES, kubernetes_validate.latest_version()]


@pytest.mark.parametrize("version", _kubernetes_versions())
def test_manifests_match_the_kubernetes_schemas(version: str) -> None:
    if importlib.util.find_spec("kubernetes_validate") is None:
        pytest.skip(
            "kubernetes-validate is not installed (it ships the Kubernetes JSON schemas): "
            "the manifests were not schema-checked"
        )
    import kubernetes_validate

    failures = []
    for file, doc in _manifests():
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            failures.append(
                f"{file} {doc['kind']}/{doc['metadata']['name']}: {path}: {exc.message}"
            )
    assert not failures, "\n".join(failures)


def test_compose_file_matches_the_compose_specification() -> None:
    if importlib.util.find_spec("check_jsonschema") is None:
        pytest.skip(
            "check-jsonschema is not installed (it ships the Compose specification's "
            "schema): compose.yaml was not schema-checked"
        )
    command = [sys.executable, "-m", "check_jsonschema"]
    command += ["--builtin-schema", "vendor.compose-spec", str(COMPOSE)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_kustomize_build_with_kubectl() -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not on PATH: `kubectl kustomize deploy/k8s` was not run")
    result = subprocess.run(
        [kubectl, "kustomize", str(K8S)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    rendered = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    expected = {(doc["kind"], doc["metadata"]["name"]) for _, doc in _manifests()}
    # The secret generator's Secrets, named with a hash of their content.
    expected |= {("Secret", g["name"]) for g in _kustomization().get("secretGenerator", [])}
    found = {
        (kind, re.sub(r"-[a-z0-9]{10}$", "", name) if kind == "Secret" else name)
        for kind, name in ((doc["kind"], doc["metadata"]["name"]) for doc in rendered)
    }
    assert found == expected
    namespace = _kustomization()["namespace"]
    for doc in rendered:
        if doc["kind"] != "Namespace":
            assert doc["metadata"].get("namespace") == namespace, doc["metadata"]["name"]
    images = {i["name"]: f"{i['newName']}:{i['newTag']}" for i in _kustomization()["images"]}
    for doc in rendered:
        if doc["kind"] in WORKLOAD_KINDS:
            for container in _pod_spec(doc)["containers"]:
                name = _image_name(container["image"])
                if name in {i.split(":")[0] for i in images.values()}:
                    assert container["image"] in images.values(), container["image"]


def _compose_command() -> list[str] | None:
    docker = shutil.which("docker")
    if docker:
        probe = subprocess.run(
            [docker, "compose", "version"], capture_output=True, text=True, timeout=60, check=False
        )
        if probe.returncode == 0:
            return [docker, "compose"]
    standalone = shutil.which("docker-compose")
    return [standalone] if standalone else None


def test_docker_compose_config() -> None:
    command = _compose_command()
    if command is None:
        pytest.skip(
            "no Compose implementation: the docker CLI here has no `compose` plugin and there "
            "is no docker-compose binary, so `docker compose config` was not run"
        )
    profiles = ["--profile", "aggregate", "--profile", "traffic", "--profile", "tools"]
    profiles += ["--profile", "monitoring"]
    result = subprocess.run(
        [*command, "-f", str(COMPOSE), *profiles, "config", "--quiet"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


# -- node metrics and health probes --------------------------------------------------------

# The labels Prometheus itself attaches to every scraped series.
TARGET_LABELS = {"job", "instance"}
# Grafana's own variables, usable in any query.
GRAFANA_BUILTINS = {"__rate_interval", "__interval", "__interval_ms", "__range", "__range_s"}
# What the dashboard must show (issue 15): every one of these is queried somewhere.
DASHBOARD_MUST_QUERY = {
    "sessionizer_fragments_consumed_total",
    "sessionizer_sessions_emitted_total",
    "sessionizer_dead_letters_total",
    "sessionizer_stream_lag",
    "sessionizer_safe_offset_lag",
    "sessionizer_open_sessions",
    "sessionizer_commit_latency_seconds_bucket",
    "sessionizer_rebalances_total",
    "sessionizer_sink_send_failures_total",
    "sessionizer_rewinds_total",
    "sessionizer_streams_owned",
}


def _configured_processor() -> str:
    """The nodes' SESSIONIZER_PROCESSOR: the ConfigMap's, and Compose's default, the same."""
    processor = str(_one("ConfigMap", "sessionizer")["data"]["SESSIONIZER_PROCESSOR"])
    compose = _compose()["services"]["node"]["environment"]["SESSIONIZER_PROCESSOR"]
    assert _compose_default(compose) == processor, "both deployments run the same processor"
    return processor


def _node_args(argv: list[str]) -> argparse.Namespace:
    """A node command line parsed by the real CLI, with no SESSIONIZER_* from this machine
    (only the processor, which the deployments set in the environment)."""
    from framework.cli import build_parser

    expanded = [_kubernetes_expand(str(arg), {"POD_NAME": "pod-0"}) for arg in argv]
    saved = {k: v for k, v in os.environ.items() if k.startswith("SESSIONIZER_")}
    for name in saved:
        del os.environ[name]
    os.environ["SESSIONIZER_PROCESSOR"] = _configured_processor()
    try:
        connection = ["--zk", "zk:2181", "--bootstrap", "kafka:9092", "--app", "sessionizer"]
        return build_parser().parse_args([*expanded, *connection])
    finally:
        del os.environ["SESSIONIZER_PROCESSOR"]
        os.environ.update(saved)


def _node_config(argv: list[str]) -> Any:
    """The `NodeConfig` that `sessionizer node` builds from this command line."""
    from framework.commands.options import connection_from_args
    from framework.node.config import NodeConfig

    args = _node_args(argv)
    assert args.command == "node", argv
    return NodeConfig(
        connection=connection_from_args(args),
        processor=args.processor,
        node_id=args.id or "test",
        commit_interval=args.commit_interval,
        session_timeout=args.session_timeout,
        delivery=args.delivery,
        drain_seconds=args.drain,
        delivery_timeout=args.delivery_timeout,
        metrics_port=args.metrics_port,
    )


def _node_container() -> dict[str, Any]:
    (node,) = _pod_spec(_one("Deployment", NODE_DEPLOYMENT))["containers"]
    return node


def _container_port(container: dict[str, Any], port: int | str) -> int:
    """A probe's or Service's port (a number or a container port's name) as a number."""
    if isinstance(port, int):
        return port
    named = {p["name"]: p["containerPort"] for p in container.get("ports", []) if "name" in p}
    assert port in named, f"{container['name']}: no container port named {port!r}"
    return int(named[port])


class _Coordinator:
    """What `LoopHealth.ready` reads of the node's coordinator."""

    def __init__(self, *, paused: bool) -> None:
        from balancer.machine import BalancerState

        self.paused = paused
        self.connected = not paused  # kazoo's connection state, read by `ready` too
        self.state = BalancerState.PAUSED if paused else BalancerState.STABLE


def _answers(paths: list[str], *, paused: bool = False, stalled: bool = False) -> dict[str, int]:
    """The status codes of a real node HTTP endpoint (`MetricsServer`) for `paths`.

    `paused`: the coordinator is paused by a ZooKeeper outage (the loop still steps);
    `stalled`: the loop's last step is older than its stall limit.
    """
    from framework.testing.metrics import http_get

    server = _health_server(paused=paused, stalled=stalled)
    try:
        return {path: http_get(server.port, path)[0] for path in paths}
    finally:
        server.close()


def _health_server(*, paused: bool, stalled: bool) -> Any:
    """A real node HTTP endpoint (`MetricsServer`), started, whose health is as told."""
    from framework.node.metrics import LoopHealth, MetricsServer, NodeMetrics

    health = LoopHealth(stall_limit=30.0, stopping=threading.Event())
    health.coordinator = _Coordinator(paused=paused)
    if stalled:
        health.last_step = time.monotonic() - 31.0
    return MetricsServer(
        NodeMetrics("n1"), port=0, host="127.0.0.1", alive=health.alive, ready=health.ready
    ).start()


def test_node_serves_metrics_on_its_declared_port_in_kubernetes() -> None:
    node = _node_container()
    port = _node_config(node["args"]).metrics_port
    assert port is not None, "the nodes must run with --metrics-port"
    assert _container_port(node, "metrics") == port, "the `metrics` container port"
    annotations = _one("Deployment", NODE_DEPLOYMENT)["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == str(port)
    assert annotations["prometheus.io/path"] == "/metrics"
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert _container_port(node, node[probe]["httpGet"]["port"]) == port, probe
    # The annotated path really is the metrics, in Prometheus text.
    assert _answers([annotations["prometheus.io/path"]]) == {"/metrics": 200}


def test_node_metrics_service_is_headless_and_keeps_unready_nodes() -> None:
    service = _one("Service", METRICS_SERVICE)
    spec = service["spec"]
    assert spec["clusterIP"] == "None", "one address per node pod: headless"
    # A node paused by a ZooKeeper outage is unready, and exactly the one to watch.
    assert spec.get("publishNotReadyAddresses") is True
    pod_labels = _pod_spec_labels(_one("Deployment", NODE_DEPLOYMENT))
    assert spec["selector"].items() <= pod_labels.items()
    (port,) = [p for p in spec["ports"] if p["name"] == "metrics"]
    node = _node_container()
    assert _container_port(node, port["targetPort"]) == _node_config(node["args"]).metrics_port
    # Scrape annotations live on the pods only; on the Service too would scrape twice.
    assert "prometheus.io/scrape" not in service["metadata"].get("annotations", {})


def test_node_probes_answer_as_the_manifest_expects() -> None:
    """The probe paths against the node's real HTTP endpoint: an outage unreadies, never kills."""
    node = _node_container()
    startup = node["startupProbe"]["httpGet"]["path"]
    liveness = node["livenessProbe"]["httpGet"]["path"]
    readiness = node["readinessProbe"]["httpGet"]["path"]
    paths = sorted({startup, liveness, readiness})
    running = _answers(paths)
    assert all(code == 200 for code in running.values()), running
    # ZooKeeper unreachable: the loop keeps stepping (paused). Unready, still alive.
    outage = _answers(paths, paused=True)
    assert outage[readiness] == 503, f"{readiness} must fail while paused: {outage}"
    assert outage[liveness] == 200, f"{liveness} must not fail while paused: {outage}"
    assert outage[startup] == 200, f"{startup} must not fail while paused: {outage}"
    # A loop stuck past the stall limit: the liveness probe fails, so the pod restarts.
    assert _answers([liveness], stalled=True)[liveness] == 503


def test_node_probe_timings() -> None:
    node = _node_container()
    config = _node_config(node["args"])
    startup, liveness, readiness = (
        node[name] for name in ("startupProbe", "livenessProbe", "readinessProbe")
    )
    for name, probe in [("startup", startup), ("liveness", liveness), ("readiness", readiness)]:
        assert probe["timeoutSeconds"] < probe["periodSeconds"], name
        assert probe.get("successThreshold", 1) == 1, name
    # /healthz already waits out the longest legitimate block (the stall limit) before
    # it fails, so liveness adds only a little patience: a second failure, not minutes.
    assert liveness["failureThreshold"] >= 2, "one slow answer must not restart a node"
    patience = liveness["periodSeconds"] * liveness["failureThreshold"]
    assert patience <= config.stall_limit, f"liveness waits {patience}s on top of the stall limit"
    # A ZooKeeper outage makes the pod unready within seconds (it holds rollouts).
    unready_after = readiness["periodSeconds"] * readiness["failureThreshold"]
    assert unready_after <= 15, f"readiness notices an outage only after {unready_after}s"
    # Before the port opens, a node connects to ZooKeeper (15 s at most) and Kafka;
    # the startup probe covers that, and liveness starts after it.
    window = startup["periodSeconds"] * startup["failureThreshold"]
    assert window >= 60, f"startupProbe allows only {window}s to connect"
    assert "initialDelaySeconds" not in liveness, "the startup probe holds liveness back"


def test_service_monitor_shape() -> None:
    """The ServiceMonitor CRD is not in kubernetes-validate's schemas: checked by hand here."""
    (monitor,) = _load_all(SERVICE_MONITOR)
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["kind"] == "ServiceMonitor"
    assert set(monitor) == {"apiVersion", "kind", "metadata", "spec"}
    metadata = monitor["metadata"]
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", metadata["name"]), metadata["name"]
    assert "namespace" not in metadata, "applied with -n, into the kustomization's namespace"
    spec = monitor["spec"]
    known_spec = {
        "selector", "endpoints", "namespaceSelector", "jobLabel", "targetLabels",
        "podTargetLabels", "sampleLimit", "targetLimit", "labelLimit", "attachMetadata",
    }  # fmt: skip
    assert set(spec) <= known_spec, f"unknown ServiceMonitor fields {set(spec) - known_spec}"
    assert set(spec["selector"]) == {"matchLabels"}
    selected = [
        s
        for s in _objects("Service")
        if spec["selector"]["matchLabels"].items() <= s["metadata"].get("labels", {}).items()
    ]
    assert [s["metadata"]["name"] for s in selected] == [METRICS_SERVICE]
    service_ports = {p["name"] for p in selected[0]["spec"]["ports"]}
    known_endpoint = {
        "port", "targetPort", "path", "scheme", "interval", "scrapeTimeout", "honorLabels",
        "honorTimestamps", "relabelings", "metricRelabelings", "params", "enableHttp2",
        "followRedirects", "filterRunning",
    }  # fmt: skip
    # The CRD's pattern for a duration.
    duration = re.compile(
        r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?"
        r"(([0-9]+)ms)?)$"
    )
    path = _one("Deployment", NODE_DEPLOYMENT)["spec"]["template"]["metadata"]["annotations"][
        "prometheus.io/path"
    ]
    assert spec["endpoints"], "no endpoints"
    for endpoint in spec["endpoints"]:
        assert set(endpoint) <= known_endpoint, set(endpoint) - known_endpoint
        assert endpoint["port"] in service_ports, f"the Service has no port {endpoint['port']!r}"
        assert endpoint.get("path", "/metrics") == path
        assert endpoint.get("scheme", "http") == "http"
        for key in ("interval", "scrapeTimeout"):
            assert duration.fullmatch(endpoint[key]), f"{key}: {endpoint[key]!r}"
        interval = _duration_seconds(endpoint["interval"])
        assert _duration_seconds(endpoint["scrapeTimeout"]) <= interval
    # The metadata alone is a Kubernetes ObjectMeta: validate it strictly as one.
    if importlib.util.find_spec("kubernetes_validate") is not None:
        import kubernetes_validate

        carrier = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}
        kubernetes_validate.validate(carrier, OLDEST_KUBERNETES, strict=True)


def test_compose_nodes_serve_metrics_and_check_their_health() -> None:
    node = _compose()["services"]["node"]
    port = _node_config(node["command"]).metrics_port
    assert port is not None, "the nodes must run with --metrics-port"
    # Inside the network only: a fixed host port would clash between replicas.
    assert str(port) in [str(p) for p in node["expose"]]
    assert "ports" not in node
    labels = node["labels"]
    assert labels["prometheus.io/scrape"] == "true"
    assert labels["prometheus.io/port"] == str(port)
    assert labels["prometheus.io/path"] == "/metrics"
    test = node["healthcheck"]["test"]
    assert test[0] == "CMD" and test[1] == "python", "the image has Python, not curl"
    script = test[test.index("-c") + 1]
    assert f"http://127.0.0.1:{port}/healthz" in script, "the check asks the node's /healthz"
    interval = _duration_seconds(node["healthcheck"]["interval"])
    assert _duration_seconds(node["healthcheck"]["timeout"]) <= interval
    _run_health_check(script, port)


def _run_health_check(script: str, port: int) -> None:
    """Run the healthcheck's own script against a real node endpoint: exit 0 only if alive."""
    for stalled, paused, expected in [(False, False, 0), (False, True, 0), (True, False, 1)]:
        server = _health_server(paused=paused, stalled=stalled)
        try:
            local = script.replace(f"127.0.0.1:{port}/", f"127.0.0.1:{server.port}/")
            result = subprocess.run(
                [sys.executable, "-c", local], capture_output=True, timeout=30, check=False
            )
        finally:
            server.close()
        code = 0 if result.returncode == 0 else 1
        assert code == expected, f"stalled={stalled} paused={paused}: exit {result.returncode}"


def _assert_publishes(service: dict[str, Any], container_port: int) -> None:
    """The Compose service publishes this container port (`HOST:CONTAINER` or `CONTAINER`)."""
    published = [str(p) for p in service.get("ports", [])]
    assert any(p.rsplit(":", 1)[-1] == str(container_port) for p in published), published


def _bind_mounts(service: dict[str, Any]) -> dict[str, Path]:
    """Target path -> the file or folder beside compose.yaml that a service mounts there."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target, *_ = volume.split(":")
        if source.startswith((".", "/")):
            mounts[target] = (COMPOSE.parent / source).resolve()
    return mounts


def test_compose_prometheus_scrapes_every_node() -> None:
    services = _compose()["services"]
    prometheus = services["prometheus"]
    flags = dict(arg.split("=", 1) for arg in prometheus["command"])
    mounts = _bind_mounts(prometheus)
    assert mounts[flags["--config.file"]] == PROMETHEUS_CONFIG.resolve()
    _assert_publishes(prometheus, 9090)
    (config,) = _load_all(PROMETHEUS_CONFIG)
    node = services["node"]
    port = _node_config(node["command"]).metrics_port
    scrape_interval = _duration_seconds(config["global"]["scrape_interval"])
    assert _duration_seconds(config["global"]["scrape_timeout"]) <= scrape_interval
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "sessionizer-node"]
    assert job.get("metrics_path", "/metrics") == node["labels"]["prometheus.io/path"]
    # Docker's DNS answers a service name with every replica's address.
    (discovery,) = job["dns_sd_configs"]
    assert discovery["type"] == "A" and discovery["port"] == port
    assert discovery["names"] == ["node"] and "node" in services
    assert job.get("honor_labels") is True, "the node id is the metric's own `node` label"


def test_compose_grafana_loads_the_dashboard_from_prometheus() -> None:
    services = _compose()["services"]
    grafana = services["grafana"]
    mounts = _bind_mounts(grafana)
    assert mounts["/etc/grafana/provisioning"] == (GRAFANA / "provisioning").resolve()
    (dashboard_target,) = [t for t, s in mounts.items() if s == DASHBOARD.resolve()]
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == dashboard_target
    (providers,) = _load_all(GRAFANA / "provisioning" / "dashboards" / "sessionizer.yaml")
    folders = [p["options"]["path"] for p in providers["providers"] if p["type"] == "file"]
    assert folders == [str(Path(dashboard_target).parent)]
    (sources,) = _load_all(GRAFANA / "provisioning" / "datasources" / "prometheus.yaml")
    (source,) = sources["datasources"]
    assert source["type"] == "prometheus" and source["isDefault"] is True
    match = re.fullmatch(r"http://([a-z0-9-]+):(\d+)", source["url"])
    assert match and match[1] in services, source["url"]
    _assert_publishes(services[match[1]], int(match[2]))
    assert grafana["profiles"] == services["prometheus"]["profiles"] == ["monitoring"]
    _assert_publishes(grafana, 3000)


def _promtool() -> str:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not on PATH: the Prometheus configuration and PromQL not checked")
    return promtool


def test_prometheus_config_with_promtool() -> None:
    result = subprocess.run(
        [_promtool(), "check", "config", "--syntax-only", str(PROMETHEUS_CONFIG)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


# -- the Grafana dashboard -----------------------------------------------------------------


@functools.cache
def _dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def _dashboard_panels() -> list[dict[str, Any]]:
    panels = []
    for panel in _dashboard()["panels"]:
        panels.append(panel)
        panels.extend(panel.get("panels", []))  # a collapsed row holds its panels
    return panels


def _dashboard_queries() -> list[tuple[str, str, str]]:
    """(where, PromQL, legend) of every panel target and query variable."""
    queries = []
    for panel in _dashboard_panels():
        for target in panel.get("targets", []):
            where = f"panel {panel['title']!r} {target['refId']}"
            queries.append((where, target["expr"], target.get("legendFormat", "")))
    for variable in _dashboard()["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            text = query["query"] if isinstance(query, dict) else query
            match = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", text)
            assert match, f"variable {variable['name']}: {text!r}"
            queries.append((f"variable {variable['name']}", match[1], f"{{{{{match[2]}}}}}"))
    return queries


_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset"}
_PROMQL_WORDS |= {"bool", "and", "or", "unless", "inf", "nan"}


def _promql_parts(expr: str) -> tuple[list[tuple[str, set[str]]], set[str]]:
    """([(metric, labels matched)] of every selector, labels grouped by) of an expression."""
    text = re.sub(r"\[[^\]]*\]", "", expr)  # range durations, $__rate_interval
    grouping = {
        label.strip() for labels in _GROUPING.findall(text) for label in labels.split(",")
    } - {""}
    text = _GROUPING.sub(" ", text)
    selectors = []
    for match in re.finditer(r"([A-Za-z_:][A-Za-z0-9_:]*)\s*(\{[^}]*\})?\s*(\()?", text):
        name, matchers, call = match.groups()
        if call or name in _PROMQL_WORDS:
            continue  # a function or a keyword
        labels = set(re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", matchers or ""))
        selectors.append((name, labels))
    return selectors, grouping


@functools.cache
def _served_metrics() -> dict[str, frozenset[str]]:
    """Every sample name a node serves, with its label names.

    A node runs in-process over the test kit's in-memory parts (as test_node_metrics.py
    does), with one record that cannot be decoded so a dead letter has a reason, and its
    registry is scraped with `generate_latest` while it owns its streams.
    """
    import dataclasses

    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from framework.kernel.records import StreamRecord
    from framework.node.node import Node
    from framework.testing.metrics import metric_samples
    from framework.testkit.memory import MemoryLog, memory_parts, node_config, traffic_log
    from router.generator import generate_fragments
    from sessionizer.examples.weblog import WebSessions
    from sessionizer.sinks import MemorySink
    from state.store import VersionedMemory

    streams = traffic_log(list(generate_fragments(80, seed=3)), 3)  # test_node_metrics's
    first = sorted(streams)[0]
    garbage = StreamRecord(first, 0, b"k", b"\xff\xfe not a fragment", 1)
    streams[first] = [
        dataclasses.replace(r, offset=i) for i, r in enumerate([garbage, *streams[first]])
    ]
    log = MemoryLog(streams, per_poll=2)
    scrapes: list[str] = []

    def scrape(coordinator: Any) -> None:
        # Poll 1 assigns the streams and the step after it publishes their figures.
        if coordinator.polls == 3 and node.metrics is not None:
            scrapes.append(generate_latest(node.metrics.registry).decode())

    node = Node(
        node_config(metrics_port=0, metrics_host="127.0.0.1"),
        processor=WebSessions(),
        parts=memory_parts(log, MemorySink(), VersionedMemory(), log.caught_up, on_poll=scrape),
    )
    node.run()
    assert scrapes, "the node ended before it was scraped"
    served: dict[str, set[str]] = {}
    for (name, labels), _ in metric_samples(scrapes[0]).items():
        served.setdefault(name, set()).update(label for label, _ in labels)
    suffixes = {"counter": ["_total"], "gauge": [""], "histogram": ["_bucket", "_count", "_sum"]}
    for family in text_string_to_metric_families(scrapes[0]):
        for suffix in suffixes.get(family.type, []):
            served.setdefault(family.name + suffix, set())
    return {name: frozenset(labels) for name, labels in served.items()}


def test_dashboard_is_grafana_dashboard_json() -> None:
    dashboard = _dashboard()
    assert isinstance(dashboard["schemaVersion"], int) and dashboard["schemaVersion"] >= 36
    assert dashboard["title"] and re.fullmatch(r"[A-Za-z0-9_-]{1,40}", dashboard["uid"])
    assert dashboard.get("id") is None, "an exported dashboard carries no database id"
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    datasource = variables["datasource"]
    assert datasource["type"] == "datasource" and datasource["query"] == "prometheus"
    expected_source = {"type": "prometheus", "uid": "${datasource}"}
    ids, cells = set(), set()
    for panel in _dashboard_panels():
        where = f"panel {panel.get('title')!r}"
        assert isinstance(panel["id"], int) and panel["id"] not in ids, f"{where}: id"
        ids.add(panel["id"])
        grid = panel["gridPos"]
        assert all(isinstance(grid[k], int) for k in "hwxy"), where
        assert grid["w"] >= 1 and grid["h"] >= 1 and grid["x"] + grid["w"] <= 24, where
        columns = range(grid["x"], grid["x"] + grid["w"])
        area = {(x, y) for x in columns for y in range(grid["y"], grid["y"] + grid["h"])}
        assert not area & cells, f"{where} overlaps another panel"
        cells |= area
        if panel["type"] == "row":
            continue
        assert panel["type"] in {"timeseries", "stat", "gauge", "bargauge", "table"}, where
        assert panel["title"] and panel["datasource"] == expected_source, where
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs)), f"{where}: refIds"
        for target in panel["targets"]:
            assert target["datasource"] == expected_source, where
            assert target["expr"].strip(), where
    for variable in variables.values():
        if variable["type"] == "query":
            assert variable["datasource"] == expected_source, variable["name"]
    # Every $variable an expression uses is defined (or Grafana's own).
    for where, expr, _ in _dashboard_queries():
        for name in re.findall(r"\$\{?(\w+)", expr):
            assert name in variables or name in GRAFANA_BUILTINS, f"{where}: ${name}"


def test_dashboard_queries_only_what_a_node_serves() -> None:
    served = _served_metrics()
    used: set[str] = set()
    quantiles = set()
    for where, expr, legend in _dashboard_queries():
        selectors, grouping = _promql_parts(expr)
        assert selectors, f"{where}: no metric in {expr!r}"
        labels: set[str] = set()
        for name, matched in selectors:
            assert name in served, f"{where}: a node serves no {name!r}"
            assert matched <= served[name] | TARGET_LABELS, f"{where}: {name} has no {matched}"
            labels |= served[name]
            used.add(name)
        assert grouping <= labels | TARGET_LABELS, f"{where}: grouped by unknown {grouping}"
        shown = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", legend))
        kept = grouping if grouping else labels | TARGET_LABELS
        assert shown <= kept, f"{where}: legend {legend!r} names labels the query drops"
        quantiles |= {float(q) for q in re.findall(r"histogram_quantile\(\s*([\d.]+)", expr)}
    missing = DASHBOARD_MUST_QUERY - used
    assert not missing, f"the dashboard shows nothing of {sorted(missing)}"
    assert {0.5, 0.99} <= quantiles, "commit latency p50 and p99"


def test_dashboard_queries_parse_with_promtool(tmp_path: Path) -> None:
    promtool = _promtool()
    values = {"__rate_interval": "1m", "__interval": "15s", "__range": "1h"}
    rules = []
    for i, (_, expr, _) in enumerate(_dashboard_queries()):
        text = re.sub(r"\$\{?(\w+)\}?", lambda m: values.get(m[1], ".*"), expr)
        rules.append({"record": f"dashboard:query_{i}", "expr": text})
    path = tmp_path / "dashboard_rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = subprocess.run(
        [promtool, "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_readme_documents_metrics_and_probes() -> None:
    text = README.read_text()
    node = _node_container()
    port = _node_config(node["args"]).metrics_port
    for needle in [
        f"--metrics-port {port}",
        "/healthz",
        "/readyz",
        "servicemonitor.yaml",
        "grafana/sessionizer-node.json",
        "prometheus/prometheus.yml",
        "--profile monitoring",
        METRICS_SERVICE,
    ]:
        assert needle in text, f"deploy/README.md does not mention {needle!r}"
