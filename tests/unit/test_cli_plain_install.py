"""A plain install (no extras: no pytest, no hypothesis) runs the CLI: test support is a leaf.

The slow proof installs the package into a fresh virtualenv; this fast one runs the
CLI in a subprocess whose importer refuses the test-only modules, and checks that
no product module imports them anywhere (also inside a function).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("framework", "router", "balancer", "state", "sessionizer")
TEST_SUPPORT = ("framework.testing", "framework.testkit")
REFUSED = ("pytest", "_pytest", "hypothesis", "testcontainers", *TEST_SUPPORT)

# Runs in a child: refuse the test-only modules, build the parser, run every --help.
_CHILD = textwrap.dedent(
    """
    import argparse, contextlib, io, json, sys

    REFUSED = {refused!r}

    class Refuse:
        def find_spec(self, name, path=None, target=None):
            if any(name == r or name.startswith(r + ".") for r in REFUSED):
                raise ModuleNotFoundError(f"refused in a plain install: {{name}}", name=name)
            return None

    sys.meta_path.insert(0, Refuse())
    from framework.cli import build_parser

    def leaves(parser, path):
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs:
            yield path
        for sub in subs:
            for name, child in sub.choices.items():
                yield from leaves(child, [*path, name])

    parser = build_parser()
    helped = []
    for path in [[], *leaves(parser, [])]:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            build_parser().parse_args([*path, "--help"])
        assert out.getvalue().startswith("usage: sessionizer"), (path, out.getvalue()[:200])
        helped.append(" ".join(path))
    loaded = sorted(m for m in sys.modules if any(m == r or m.startswith(r + ".") for r in REFUSED))
    print(json.dumps({{"helped": helped, "loaded": loaded}}))
    """
)


def test_every_command_help_runs_without_test_dependencies() -> None:
    child = _CHILD.format(refused=REFUSED)
    result = subprocess.run(
        [sys.executable, "-c", child], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["loaded"] == []
    # The walk reached the commands (a walk that found none would prove nothing).
    assert {"", "node", "demo", "cluster up", "streams create", "produce"} <= set(report["helped"])


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_no_product_module_imports_test_support() -> None:
    offenders = []
    checked = 0
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            if any(module == t or module.startswith(t + ".") for t in TEST_SUPPORT):
                continue
            checked += 1
            for name in _imports(path):
                if any(name == r or name.startswith(r + ".") for r in REFUSED):
                    offenders.append(f"{path.relative_to(ROOT)} imports {name}")
    assert checked > 50
    assert offenders == []
