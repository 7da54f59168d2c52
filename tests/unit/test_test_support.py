"""Where test support lives: the test kit for users (no pytest), `framework.testing` for this
repository's own, and no test module imported by another as a library."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from framework.kernel.records import StreamRecord
from framework.node.ports import SourceRecord
from framework.testing.docs import ROOT, python_blocks, readme_page_views

TESTS = ROOT / "tests"
TESTKIT = ROOT / "framework" / "testkit"
DOCS = ROOT / "docs" / "testing.md"


def _imports(path: Path) -> Iterator[tuple[int, str, int]]:
    """(line, imported module, relative level) of every import in a file, nested ones too."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name, 0) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield node.lineno, node.module or "", node.level


def test_no_test_module_imports_another_module_under_tests() -> None:
    """Shared helpers live in framework.testing or framework.testkit, not in test modules."""
    local = {path.stem for path in TESTS.rglob("*.py")}
    found = [
        f"{path.relative_to(ROOT)}:{line}: {'.' * level}{module}"
        for path in sorted(TESTS.rglob("*.py"))
        for line, module, level in _imports(path)
        if level > 0 or module.split(".")[0] in {"tests", *local}
    ]
    assert found == []


def test_the_test_kit_imports_no_pytest_nor_the_repository_fixtures() -> None:
    """Users' tests may run under any runner: the kit needs neither pytest nor hypothesis."""
    banned = {"pytest", "_pytest", "hypothesis", "testcontainers"}
    found = [
        f"{path.relative_to(ROOT)}:{line}: {module}"
        for path in sorted(TESTKIT.rglob("*.py"))
        for line, module, _ in _imports(path)
        if module.split(".")[0] in banned or module.startswith("framework.testing")
    ]
    assert found == []


def test_the_documented_node_in_memory_runs() -> None:
    """docs/testing.md's example drives a real Node over the kit's in-memory parts."""
    blocks = python_blocks(DOCS, "### A real node in memory", until="\n#")
    assert len(blocks) == 1 and "Node(node_config()" in blocks[0]
    namespace: dict[str, Any] = {"PageViews": readme_page_views()}
    exec(compile(blocks[0], str(DOCS), "exec"), namespace)
    assert namespace["faulty"].lost > 0  # the fault happened, so the equality above proves it


def test_one_record_type_and_kafka_python_records_fit_its_protocol() -> None:
    """`StreamRecord` is a `SourceRecord`; kafka-python's own record has the same fields."""
    from kafka.consumer.fetcher import ConsumerRecord

    record: SourceRecord = StreamRecord("app.stream.0000", 3, b"k", b"v", 1_000)
    assert (record.topic, record.offset, record.headers) == ("app.stream.0000", 3, None)
    protocol = {name for name in vars(SourceRecord) if not name.startswith("_")}
    assert protocol <= set(StreamRecord.__dataclass_fields__)
    assert protocol <= set(ConsumerRecord._fields)
