"""Offline checks of deploy/: the Dockerfile, the compose file and the Kubernetes manifests.

Nothing here starts a server, a container or a cluster. The tests parse every YAML
file, check the invariants the files promise (pinned images, resources, probes,
ConfigMap keys, quorum sizes, replication settings, the real CLI's flags), and run
the offline validators that are installed: kubernetes-validate (Kubernetes JSON
schemas, strict), check-jsonschema (the Compose specification's schema),
`kubectl kustomize` and `docker compose config`. A missing validator is a skip
that names what is missing, never a silent pass.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import re
import shutil
import subprocess
import sys
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

SESSIONIZER_IMAGE = "sessionizer"
CONNECTION_VARIABLES = ("SESSIONIZER_ZK", "SESSIONIZER_BOOTSTRAP", "SESSIONIZER_APP")
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "Job", "CronJob")
# What a node needs after --drain: the last commit, closing its clients, a slow disk.
SHUTDOWN_MARGIN_SECONDS = 20
# The oldest Kubernetes the manifests claim to support (deploy/README.md).
OLDEST_KUBERNETES = "1.27.0"


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
    present = sorted(p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(listed) == present, "kustomization.yaml resources != the files in deploy/k8s"
    assert len(listed) == len(set(listed))
    names = [(doc["kind"], doc["metadata"]["name"]) for _, doc in _manifests()]
    assert len(names) == len(set(names)), "two objects share a kind and name"
    for file, doc in _manifests():
        assert doc.get("apiVersion") and doc.get("kind"), f"{file}: object without apiVersion/kind"


def test_images_are_pinned_to_a_version() -> None:
    version_tag = re.compile(r"\d+(\.\d+)+(-[A-Za-z0-9.]+)*")
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
    # The nodes have none on purpose (deploy/k8s/nodes.yaml says why); rollouts are
    # paced by minReadySeconds instead.
    deployment = _one("Deployment", "sessionizer-node")
    (node,) = _pod_spec(deployment)["containers"]
    assert "readinessProbe" not in node and "livenessProbe" not in node
    assert "preStop" not in node.get("lifecycle", {}), "SIGTERM is handled; no preStop"
    assert deployment["spec"]["minReadySeconds"] > 0
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def test_node_grace_period_covers_the_drain() -> None:
    deployment = _one("Deployment", "sessionizer-node")
    (node,) = _pod_spec(deployment)["containers"]
    drain = float(_option(node["args"], "--drain"))
    grace = _pod_spec(deployment)["terminationGracePeriodSeconds"]
    assert grace >= drain + SHUTDOWN_MARGIN_SECONDS, f"grace {grace}s < drain {drain}s + margin"


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
    assert "healthcheck" not in node, "the nodes have no health check (deploy/README.md)"
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
    from router.naming import validate_app

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
    assert {(doc["kind"], doc["metadata"]["name"]) for doc in rendered} == expected
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
    result = subprocess.run(
        [*command, "-f", str(COMPOSE), *profiles, "config", "--quiet"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
