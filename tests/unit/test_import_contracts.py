"""The layers of docs/architecture.md, as import-linter contracts: whole, kept, and able to fail."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("framework", "router", "balancer", "state", "sessionizer")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _contracts() -> dict[str, dict[str, Any]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return {c["id"]: c for c in config["tool"]["importlinter"]["contracts"]}


def _framework_children() -> set[str]:
    """`framework.X` for every module and subpackage directly in framework/."""
    children = {
        f"framework.{path.stem}"
        for path in (ROOT / "framework").iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").exists()
    }
    return children


def test_the_kernel_contract_names_every_other_module() -> None:
    """A new module of framework must be added to the list the kernel may not import."""
    forbidden = set(_contracts()["kernel"]["forbidden_modules"])
    expected = (_framework_children() - {"framework.kernel"}) | set(PACKAGES[1:])
    assert forbidden == expected


def test_the_test_support_contract_covers_every_product_module() -> None:
    """Every product module is a source of the no-test-support contract."""
    sources = set(_contracts()["no-test-support"]["source_modules"])
    support = {"framework.testing", "framework.testkit"}
    assert sources == (_framework_children() - support) | set(PACKAGES[1:])


def test_the_client_layer_contracts_name_every_other_module() -> None:
    """The client layer imports only the kernel; only the layer imports a client library."""
    contracts = _contracts()
    layer_forbidden = set(contracts["client-layer"]["forbidden_modules"])
    expected = (_framework_children() - {"framework.kernel", "framework.kafka"}) | set(PACKAGES[1:])
    assert layer_forbidden == expected
    sources = set(contracts["kafka-clients"]["source_modules"])
    support = {"framework.testing", "framework.testkit", "framework.kafka"}
    assert sources == (_framework_children() - support) | set(PACKAGES[1:])


def _lint_imports(tree: Path, *contracts: str) -> subprocess.CompletedProcess[str]:
    only = [arg for contract in contracts for arg in ("--contract", contract)]
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", *only],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the packages and the contracts, to plant imports in."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("*.pyc"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_contracts_are_kept(tree: Path) -> None:
    result = _lint_imports(tree)
    assert result.returncode == 0, result.stdout[-3000:]


@pytest.mark.parametrize(
    ("module", "planted", "contract"),
    [
        ("state/record.py", "from framework.node import node", "layers"),
        ("router/hashing.py", "import balancer.claims", "layers"),
        ("framework/kernel/limits.py", "import framework.node.stats", "kernel"),
        ("framework/kernel/errors.py", "import router.hashing", "kernel"),
        ("sessionizer/engine.py", "import framework.testkit", "no-test-support"),
        ("framework/commands/node.py", "import pytest", "no-test-support"),
        ("sessionizer/sinks.py", "import confluent_kafka", "kafka-clients"),
        ("router/producer_transport.py", "from kafka import KafkaProducer", "kafka-clients"),
        ("framework/kafka/producer.py", "import framework.node.stats", "client-layer"),
    ],
)
def test_a_wrong_way_import_breaks_the_lint(
    tree: Path, module: str, planted: str, contract: str
) -> None:
    """What `make lint` runs fails on an import against the layers: that contract breaks."""
    assert _lint_imports(tree, contract).returncode == 0
    path = tree / module
    path.write_text(path.read_text(encoding="utf-8") + f"\n{planted}  # planted\n")
    result = _lint_imports(tree, contract)
    assert result.returncode != 0 and "BROKEN" in result.stdout, result.stdout[-3000:]
    assert _lint_imports(tree).returncode != 0  # and so does the whole lint
