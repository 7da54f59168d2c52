"""deploy/ cannot drift from the CLI: every flag and variable it passes is one the CLI has.

The Kubernetes objects are the kustomization rendered by `kubectl kustomize` (or
its Python equivalent without kubectl), the Compose services come from
`compose.yaml`, the image's commands from `deploy/smoke-test.sh`, which the
Dockerfile runs. Each command line is checked against `framework.cli.build_parser()`:
its command exists, every flag is spelled out in full and belongs to that command,
every `SESSIONIZER_*` variable it is given is read by one of that command's options,
and any other variable is used in its args. Then each is parsed with the
environment the deployment gives it (ConfigMap values, Compose defaults, mounted
secrets), as the container would parse it.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from framework.cli import build_parser
from framework.commands.options import connection_from_args
from framework.kernel.client_settings import read_zk_auth
from framework.testing.deploy import (
    DEPLOY,
    SMOKE_TEST,
    Invocation,
    all_invocations,
    cli_problems,
    command_tree,
    compose_invocations,
    k8s_invocations,
    materialize,
    names,
    render,
    render_in_python,
    smoke_commands,
)

INVOCATIONS = all_invocations()
DEPLOYED = [i for i in INVOCATIONS if not i.where.startswith("smoke-test")]


def test_every_flag_and_variable_the_deployments_pass_exists_in_the_cli() -> None:
    parser = build_parser()
    problems = [p for invocation in INVOCATIONS for p in cli_problems(invocation, parser)]
    assert not problems, "\n".join(problems)
    assert {"k8s", "compose", "smoke-test"} == {i.where.split()[0] for i in INVOCATIONS}


@pytest.mark.parametrize("invocation", DEPLOYED, ids=names(DEPLOYED))
def test_each_command_line_parses_with_the_environment_it_is_given(
    invocation: Invocation, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from framework.node.loader import load_processor

    for variable in [v for v in os.environ if v.startswith("SESSIONIZER_")]:
        monkeypatch.delenv(variable)  # only what the deployment sets
    for name, value in materialize(invocation, tmp_path).items():
        monkeypatch.setenv(name, value)
    try:
        args = build_parser().parse_args(invocation.argv)
    except SystemExit:
        pytest.fail(f"{invocation.where}: `sessionizer {' '.join(invocation.argv)}` rejected")
    connection = connection_from_args(args)  # reads the mounted properties and identity
    assert connection.kafka_config == {} and connection.zk_auth is None  # as shipped: none
    if args.command == "node":
        load_processor(args.processor)  # the ConfigMap's / default MODULE:CLASS loads


def test_credentials_reach_every_sessionizer_container_from_a_secret() -> None:
    for invocation in DEPLOYED:
        config = invocation.env.get("SESSIONIZER_KAFKA_CONFIG")
        auth = invocation.env.get("SESSIONIZER_ZK_AUTH", "")
        assert config in invocation.files, f"{invocation.where}: --kafka-config not mounted"
        assert auth.startswith("@") and auth[1:] in invocation.files, invocation.where


def test_the_processor_is_configuration_not_a_hard_coded_flag() -> None:
    nodes = [i for i in DEPLOYED if i.argv[:1] == ["node"]]
    assert {i.where for i in nodes} == {"k8s sessionizer-node/node", "compose node"}
    for node in nodes:
        assert "--processor" not in node.argv, f"{node.where}: set SESSIONIZER_PROCESSOR"
        assert node.env["SESSIONIZER_PROCESSOR"] == "sessionizer.examples.weblog:WebSessions"
    compose = (DEPLOY / "compose" / "compose.yaml").read_text()
    assert "${SESSIONIZER_PROCESSOR:-" in compose  # settable from the shell or .env
    configmap = (DEPLOY / "k8s" / "configmap.yaml").read_text()
    assert "SESSIONIZER_PROCESSOR:" in configmap


def _plant(tmp_path: Path) -> Path:
    """A copy of deploy/ with a wrong flag and variables planted in its manifests."""
    copy = tmp_path / "deploy"
    shutil.copytree(DEPLOY / "k8s", copy / "k8s")
    shutil.copytree(DEPLOY / "compose", copy / "compose")
    shutil.copy(SMOKE_TEST, copy / "smoke-test.sh")
    nodes = copy / "k8s" / "nodes.yaml"
    nodes.write_text(nodes.read_text().replace("- --drain\n", "- --drian\n", 1))
    job = copy / "k8s" / "streams-job.yaml"
    job.write_text(job.read_text().replace('"--count", "32"', '"--count", "32", "--drain", "5"'))
    compose = copy / "compose" / "compose.yaml"
    compose.write_text(
        compose.read_text().replace("SESSIONIZER_PROCESSOR:", "SESSIONIZER_PROCESOR:", 1)
    )
    smoke = copy / "smoke-test.sh"
    smoke.write_text(smoke.read_text().replace('"sessions" \\', '"session" \\'))
    return copy


def test_a_planted_wrong_flag_or_variable_is_caught(tmp_path: Path) -> None:
    planted = _plant(tmp_path)
    parser = build_parser()
    problems = [p for i in all_invocations(planted) for p in cli_problems(i, parser)]
    assert problems == [
        "k8s sessionizer-node/node: `sessionizer node` has no flag --drian",
        # A flag of another command: --drain is `node`'s, not `streams create`'s.
        "k8s streams-create/streams-create: `sessionizer streams create` has no flag --drain",
        "compose node: `sessionizer node` reads no variable SESSIONIZER_PROCESOR",
        "smoke-test sessionizer session --help: `sessionizer session` is not a command",
    ]


def test_the_python_rendering_matches_kubectl_kustomize() -> None:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not on PATH: the Python rendering is all there is")
    by_kubectl = k8s_invocations(render(DEPLOY / "k8s"))
    by_python = k8s_invocations(render_in_python(DEPLOY / "k8s"))
    assert sorted((i.where, i.argv, i.env, i.files) for i in by_kubectl) == sorted(
        (i.where, i.argv, i.env, i.files) for i in by_python
    )  # kubectl orders the objects by kind


def test_the_smoke_test_covers_every_command() -> None:
    helped = [" ".join(a[:-1]) for _, a in smoke_commands() if a[-1:] == ["--help"]]
    assert helped == ["", *command_tree(build_parser())]
    assert ("sessionizer", ["--version"]) in smoke_commands()
    assert ("python -m sessionizer", ["--version"]) in smoke_commands()


def test_the_dockerfile_runs_exactly_the_smoke_test() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    copied = re.search(r"^COPY deploy/smoke-test\.sh (\S+)$", text, re.MULTILINE)
    assert copied, "the Dockerfile copies deploy/smoke-test.sh"
    runs = " ".join(re.findall(r"^RUN (.*?)(?<!\\)$", text, re.MULTILINE | re.DOTALL))
    assert f"sh {copied[1]}" in runs
    install = runs.index("pip install /tmp/src")
    assert install < runs.index(f"sh {copied[1]}"), "the smoke test runs after the install"
    # No other command line of its own that the drift check would not see.
    assert not re.search(r"(?<![-\w])sessionizer (?!-smoke)[-\w]", runs.replace(copied[1], ""))


def test_the_variables_the_image_sets_are_read_by_the_package() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    variables = set(re.findall(r"\b(SESSIONIZER_[A-Z_]+)=", text))
    assert variables == {"SESSIONIZER_POM", "SESSIONIZER_CACHE"}
    source = "\n".join(p.read_text() for p in (DEPLOY.parent / "framework").rglob("*.py"))
    for variable in variables:
        assert f'"{variable}"' in source, f"the Dockerfile sets {variable}, which nothing reads"


def test_zk_auth_from_a_file(tmp_path: Path) -> None:
    identity = tmp_path / "zk-auth"
    identity.write_text("# the identity\n\ndigest:sessionizer:s3cret\n")
    assert read_zk_auth(f"@{identity}") == "digest:sessionizer:s3cret"
    assert read_zk_auth("digest:a:b") == "digest:a:b"
    assert read_zk_auth("") is None and read_zk_auth(None) is None
    identity.write_text("# none: the servers have no authentication\n")
    assert read_zk_auth(f"@{identity}") is None
    identity.write_text("digest:a:b\ndigest:c:d\n")
    from framework.kernel.errors import ConfigError

    with pytest.raises(ConfigError, match="2 identities"):
        read_zk_auth(f"@{identity}")
    with pytest.raises(ConfigError, match="cannot read it"):
        read_zk_auth(f"@{tmp_path / 'missing'}")


def test_compose_secrets_are_declared_files() -> None:
    compose = DEPLOY / "compose" / "compose.yaml"
    for invocation in compose_invocations(compose):
        assert set(invocation.files) == {
            "/run/secrets/kafka-client-properties",
            "/run/secrets/zk-auth",
        }, invocation.where
