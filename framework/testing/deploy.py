"""The `sessionizer` command lines deploy/ runs, with their environment, and their drift check.

Shared by `tests/unit/test_deploy_cli_drift.py` and `test_deploy_manifests.py`. The Kubernetes
objects are the kustomization as `kubectl kustomize` renders it (or, without
kubectl, `render_in_python`: resources, namespace, images and the secret generator);
the Compose services come from `compose.yaml`; the image's own commands from
`deploy/smoke-test.sh`. `cli_problems` compares one command line and the variables
it is given with the real CLI (`framework.cli.build_parser()`).
"""

from __future__ import annotations

import argparse
import base64
import re
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]  # no stubs in the dev environment

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
SMOKE_TEST = DEPLOY / "smoke-test.sh"
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "Job", "CronJob")
SESSIONIZER_IMAGE = "sessionizer"


@dataclass
class Invocation:
    """One `sessionizer` command line a deployment runs, and the variables it sets for it."""

    where: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    """Each variable's value as the container sees it (a ConfigMap's or Secret's resolved)."""
    files: dict[str, bytes] = field(default_factory=dict)
    """Files mounted into the container from secrets: absolute path -> content."""
    referenced: set[str] = field(default_factory=set)
    """The variables its args name as Kubernetes `$(VAR)` (expanded in `argv`)."""


# -- Kubernetes ------------------------------------------------------------------------


def render(k8s: Path) -> list[dict[str, Any]]:
    """The kustomization's objects: `kubectl kustomize` when kubectl is on PATH."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return render_in_python(k8s)
    done = subprocess.run(
        [kubectl, "kustomize", str(k8s)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"kubectl kustomize {k8s}: {done.stderr}"
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def render_in_python(k8s: Path) -> list[dict[str, Any]]:
    """What `kubectl kustomize` gives for this kustomization, without the secrets' hash suffix.

    Only the features deploy/k8s uses: resources, namespace, images, and a
    secretGenerator of files (referenced by their generator name).
    """
    (kustomization,) = [d for d in yaml.safe_load_all((k8s / "kustomization.yaml").read_text())]
    docs = [
        doc
        for name in kustomization["resources"]
        for doc in yaml.safe_load_all((k8s / name).read_text())
        if doc
    ]
    for generator in kustomization.get("secretGenerator", []):
        data = {}
        for entry in generator.get("files", []):
            key, _, source = entry.rpartition("=")
            data[key or Path(source).name] = base64.b64encode((k8s / source).read_bytes()).decode()
        secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "data": data}
        docs.append({**secret, "metadata": {"name": generator["name"]}})
    images = {i["name"]: f"{i.get('newName', i['name'])}:{i['newTag']}" for i in
              kustomization.get("images", [])}  # fmt: skip
    for doc in docs:
        if doc["kind"] != "Namespace":
            doc["metadata"]["namespace"] = kustomization["namespace"]
        if doc["kind"] in WORKLOAD_KINDS:
            for container in pod_spec(doc)["containers"]:
                name = container["image"].rsplit(":", 1)[0]
                container["image"] = images.get(name, container["image"])
    return docs


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    """The pod spec of a Deployment, StatefulSet, Job or CronJob."""
    if workload["kind"] == "CronJob":
        return dict(workload["spec"]["jobTemplate"]["spec"]["template"]["spec"])
    return dict(workload["spec"]["template"]["spec"])


def is_sessionizer(image: str) -> bool:
    """Whether `image` is the project's image (any registry, any tag)."""
    name = image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
    return name.rsplit("/", 1)[-1] == SESSIONIZER_IMAGE


def _by_name(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    """Objects of `kind` by name, also under their generator name (no hash suffix)."""
    objects = [doc for doc in docs if doc["kind"] == kind]
    found = {doc["metadata"]["name"]: doc for doc in objects}
    for doc in objects:  # an exact name wins over a generator name
        found.setdefault(re.sub(r"-[a-z0-9]{10}$", "", doc["metadata"]["name"]), doc)
    return found


def _secret_files(secret: dict[str, Any]) -> dict[str, bytes]:
    data = {k: base64.b64decode(v) for k, v in secret.get("data", {}).items()}
    data.update({k: str(v).encode() for k, v in secret.get("stringData", {}).items()})
    return data


def k8s_invocations(docs: list[dict[str, Any]]) -> list[Invocation]:
    """Every sessionizer container of the rendered objects, its args and its environment."""
    config_maps, secrets = _by_name(docs, "ConfigMap"), _by_name(docs, "Secret")
    found = []
    for workload in [d for d in docs if d["kind"] in WORKLOAD_KINDS]:
        spec = pod_spec(workload)
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for container in [*spec.get("initContainers", []), *spec["containers"]]:
            if not is_sessionizer(container["image"]):
                continue
            where = f"k8s {workload['metadata']['name']}/{container['name']}"
            assert "command" not in container, f"{where}: keep the image's entrypoint"
            env = {e["name"]: _k8s_value(e, config_maps, secrets, where) for e in
                   container.get("env", [])}  # fmt: skip
            files = {}
            for mount in container.get("volumeMounts", []):
                secret = volumes[mount["name"]].get("secret")
                if secret is not None:
                    for key, content in _secret_files(secrets[secret["secretName"]]).items():
                        files[f"{mount['mountPath']}/{key}"] = content
            raw = [str(a) for a in container.get("args", [])]
            argv = [_kubernetes_expand(a, env) for a in raw]
            used = {m for a in raw for m in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", a)}
            found.append(Invocation(where, argv, env, files, used))
    return found


def _k8s_value(
    entry: dict[str, Any],
    config_maps: dict[str, dict[str, Any]],
    secrets: dict[str, dict[str, Any]],
    where: str,
) -> str:
    if "value" in entry:
        return str(entry["value"])
    source = entry["valueFrom"]
    if "configMapKeyRef" in source:
        ref = source["configMapKeyRef"]
        data = config_maps[ref["name"]].get("data", {})
        assert ref["key"] in data, f"{where}: ConfigMap {ref['name']} has no {ref['key']}"
        return str(data[ref["key"]])
    if "secretKeyRef" in source:
        ref = source["secretKeyRef"]
        return _secret_files(secrets[ref["name"]])[ref["key"]].decode()
    if "fieldRef" in source:
        return f"<{source['fieldRef']['fieldPath']}>"
    raise AssertionError(f"{where}: unexpected env source {source}")


def _kubernetes_expand(text: str, defined: dict[str, str]) -> str:
    """Kubernetes' `$(VAR)` expansion of args: `$$` escapes, an unknown reference stays."""
    return re.sub(
        r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
        lambda m: "$" if m[0] == "$$" else defined.get(m[1], m[0]),
        text,
    )


# -- Compose ---------------------------------------------------------------------------


def compose_invocations(compose_file: Path) -> list[Invocation]:
    """Every sessionizer service: its command and environment (`${X:-default}` defaults)."""
    compose = yaml.safe_load(compose_file.read_text())
    declared = compose.get("secrets", {})
    found = []
    for name, service in compose["services"].items():
        if not is_sessionizer(service.get("image", "")):
            continue
        where = f"compose {name}"
        command = service.get("command", [])
        assert isinstance(command, list), f"{where}: use the list form of command"
        environment = service.get("environment", {})
        assert isinstance(environment, dict), f"{where}: use the mapping form of environment"
        env = {k: _compose_default(v) for k, v in environment.items()}
        files = {}
        for secret in service.get("secrets", []):
            source = secret if isinstance(secret, str) else secret["source"]
            target = source if isinstance(secret, str) else secret.get("target", source)
            path = target if target.startswith("/") else f"/run/secrets/{target}"
            files[path] = (compose_file.parent / declared[source]["file"]).read_bytes()
        found.append(Invocation(where, [str(a) for a in command], env, files))
    return found


def _compose_default(value: object) -> str:
    return re.sub(r"\$\{[A-Z_][A-Z0-9_]*:-([^}]*)\}", r"\1", str(value))


# -- the image -------------------------------------------------------------------------


def smoke_commands(script: Path = SMOKE_TEST) -> list[tuple[str, list[str]]]:
    """(program, arguments) of each command line the image's smoke test runs."""
    text = script.read_text()
    lines = []
    for match in re.finditer(r"^(sessionizer|python -m sessionizer) (.*?)(?: > /dev/null)?$",
                             text, re.MULTILINE):  # fmt: skip
        lines.append((match[1], match[2].split()))
    loop = re.search(r"^for command in \\\n(.*?)^\s*; do$", text, re.MULTILINE | re.DOTALL)
    assert loop, f"{script}: no `for command in ...; do` loop"
    for item in re.findall(r'^\s*"([^"]+)" \\$', loop[1], re.MULTILINE):
        lines.append(("sessionizer", [*item.split(), "--help"]))
    return lines


def smoke_invocations(script: Path = SMOKE_TEST) -> list[Invocation]:
    """The smoke test's command lines, as invocations without environment."""
    return [Invocation(f"smoke-test {p} {' '.join(a)}", a) for p, a in smoke_commands(script)]


# -- the drift check -------------------------------------------------------------------


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommand parsers of `parser` by name (none for a leaf command)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def command_tree(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[str]:
    """Every command and subcommand, as "streams create"."""
    found = []
    for name, sub in subcommands(parser).items():
        found.append(" ".join((*prefix, name)))
        found.extend(command_tree(sub, (*prefix, name)))
    return found


def variables_read(parser: argparse.ArgumentParser) -> set[str]:
    """The environment variables the options of `parser` read (their `EnvDefault`s)."""
    from framework.commands.options import EnvDefault

    return {a.default.variable for a in parser._actions if isinstance(a.default, EnvDefault)}


def cli_problems(invocation: Invocation, parser: argparse.ArgumentParser) -> list[str]:
    """What in this command line or its variables the CLI does not have (empty: nothing)."""
    where, problems = invocation.where, []
    leaf, path = parser, list[str]()
    for token in invocation.argv:
        sub = subcommands(leaf).get(token)
        if sub is not None:
            leaf, path = sub, [*path, token]
    if not path and invocation.argv and not invocation.argv[0].startswith("-"):
        problems.append(f"{where}: `sessionizer {invocation.argv[0]}` is not a command")
    command = " ".join(["sessionizer", *path])
    for token in invocation.argv:
        # argparse also takes a prefix (--avail for --available-now): spell flags out.
        if token.startswith("-") and token != "-":
            flag = token.split("=", 1)[0]
            if flag not in leaf._option_string_actions:
                problems.append(f"{where}: `{command}` has no flag {flag}")
    read = variables_read(leaf)
    for name in invocation.env:
        if name.startswith("SESSIONIZER_"):
            if name not in read:
                problems.append(f"{where}: `{command}` reads no variable {name}")
        elif name not in invocation.referenced:  # POD_NAME for --id $(POD_NAME)
            problems.append(f"{where}: {name} is set, but is no CLI variable and no $({name})")
    return problems


def all_invocations(deploy: Path = DEPLOY) -> list[Invocation]:
    """Every command line deploy/ runs: Kubernetes, Compose and the image's smoke test."""
    return [
        *k8s_invocations(render(deploy / "k8s")),
        *compose_invocations(deploy / "compose" / "compose.yaml"),
        *smoke_invocations(deploy / "smoke-test.sh"),
    ]


def materialize(invocation: Invocation, into: Path) -> dict[str, str]:
    """The invocation's variables with its mounted files written under `into`.

    A value naming a mounted file (also as `@FILE`) names the local copy instead.
    """
    local = {}
    for path, content in invocation.files.items():
        copy = into / path.lstrip("/")
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(content)
        local[path] = str(copy)
    env = {}
    for name, value in invocation.env.items():
        prefix = "@" if value.startswith("@") else ""
        env[name] = prefix + local.get(value.removeprefix("@"), value.removeprefix("@"))
    return env


def names(invocations: Iterable[Invocation]) -> list[str]:
    """The `where` of each invocation (pytest ids)."""
    return [i.where for i in invocations]
