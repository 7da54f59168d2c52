"""Two conventions of the library, read from its source (issue 21).

1. It raises only the project's exceptions (`framework.kernel.errors` and the
   packages' `errors.py`): no bare `ValueError`, `TypeError`, `KeyError` or
   `RuntimeError` (but where the data model asks for one: a mapping's
   `__getitem__` raises `KeyError`), and every exception class it defines
   derives from `SessionizerError` (a `ValueError` subclass where the standard
   type is part of the contract, e.g. `InvalidSetting`, `InvalidArgument`).
2. One import path per public name: a module's `__all__` lists only what it
   defines, a package's `__init__` exports only its own subpackages' names (but
   for the facade the README and docs show), no name is exported by two
   packages, and library code imports each name from the module that defines it.

The source is read, not imported: importing every module would need every
optional dependency (Spark, both Kafka clients).
"""

from __future__ import annotations

import argparse
import ast
import builtins
from collections import defaultdict
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest

import framework
import sessionizer
from framework.kernel.errors import ConfigError, InvalidArgument, InvalidSetting, SessionizerError
from framework.kernel.watermark import Watermark
from sessionizer.errors import HookError, SessionError
from sessionizer.processor import StreamProcessor

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ("framework", "router", "balancer", "state", "sessionizer")
BARE = frozenset({"ValueError", "TypeError", "KeyError", "RuntimeError", "Exception"})
# The data model's methods, where the builtin exception is the protocol itself.
PROTOCOL = frozenset({"__getitem__", "__setitem__", "__delitem__", "__getattr__", "__next__"})

# Where a bare builtin exception is raised on purpose: these processors stand in for a
# user's code, and a user's code raises what it likes (the engine must cope).
DELIBERATE = {
    ("framework/testing/processors.py", "ValueError"),
    ("framework/testing/processors.py", "RuntimeError"),
    ("framework/testing/engine_cases.py", "ValueError"),
    # `json.dumps` calls its `default` hook and expects a TypeError for what it cannot
    # encode; the dead letter names that class (docs/deadletters.md).
    ("sessionizer/sinks.py", "TypeError"),
}
# A simulated process death (kill -9) is a BaseException on purpose: nothing may catch it.
DELIBERATE_CLASSES = {("framework/testing/exactly_once.py", "Crash")}
# The names a package exports from outside its own subpackages: the paths the README and
# docs show users (`from framework import StreamProcessor`, `from sessionizer import
# Watermark` in docs/testing.md), and the kernel's `Fragment`, which users meet with the
# engine's other records. The defining module is then their home, not a path.
FACADE = {
    ("framework", "StreamProcessor"),
    ("sessionizer", "Watermark"),
    ("sessionizer", "Fragment"),
}
# The fixtures' modules gather, for this repository's tests, the product's process helpers
# they drive (`framework.local_nodes`, `framework.processes`) beside their own: one import
# for a test, and test support is no public path (nothing in the product imports it).
GATHERING = {"framework/testing/members.py", "framework/testing/nodes.py"}


@dataclass
class Module:
    """One library module: its file, definitions, imports and `__all__`."""

    name: str
    path: Path
    tree: ast.Module
    defined: set[str] = field(default_factory=set)
    imported: dict[str, tuple[str, str]] = field(default_factory=dict)
    exports: list[str] | None = None

    @property
    def is_package(self) -> bool:
        """Whether this is a package's `__init__`."""
        return self.path.name == "__init__.py"

    @property
    def where(self) -> str:
        """The file relative to the repository, as failure messages show it."""
        return self.path.relative_to(ROOT).as_posix()


def _read(module: Module, body: list[ast.stmt]) -> None:
    """Top-level definitions, `from X import Y` and `__all__` (inside `if`/`try` too)."""
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            module.defined.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name) and target.id == "__all__":
                    values = node.value.elts if isinstance(node.value, ast.List) else []
                    module.exports = [v.value for v in values if isinstance(v, ast.Constant)]
                elif isinstance(target, ast.Name):
                    module.defined.add(target.id)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                module.imported[alias.asname or alias.name] = (node.module, alias.name)
        elif isinstance(node, ast.If | ast.Try):
            _read(module, node.body + node.orelse)
            for handler in getattr(node, "handlers", []):
                _read(module, handler.body)


@cache
def modules() -> dict[str, Module]:
    """Every module of the library packages, by dotted name."""
    found: dict[str, Module] = {}
    for package in LIBRARY:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            module = Module(name, path, ast.parse(path.read_text(), str(path)))
            _read(module, module.tree.body)
            found[name] = module
    return found


def origin(module: str, name: str) -> tuple[str, str]:
    """The (module, name) that defines `module.name`, following imports between modules."""
    seen: set[tuple[str, str]] = set()
    while (module, name) not in seen and module in modules():
        seen.add((module, name))
        here = modules()[module]
        if name in here.defined or name not in here.imported:
            break
        module, name = here.imported[name]
    return module, name


def _in_library(module: str) -> bool:
    return module.split(".")[0] in LIBRARY


# -- 1. the project's exceptions ---------------------------------------------------------


def _raised(node: ast.Raise) -> str | None:
    """The builtin exception a `raise` statement raises by name, or None."""
    call = node.exc
    target = call.func if isinstance(call, ast.Call) else call
    if isinstance(target, ast.Name) and target.id in BARE:
        return target.id
    return None


def _protocol_methods(tree: ast.Module) -> set[int]:
    """The lines of the data model's methods whose builtin exception is the contract."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in PROTOCOL:
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


@cache
def bare_raises() -> dict[tuple[str, str], list[int]]:
    """(file, builtin) -> the lines raising it, over the whole library."""
    sites: dict[tuple[str, str], list[int]] = defaultdict(list)
    for module in modules().values():
        protocol = _protocol_methods(module.tree)
        for node in ast.walk(module.tree):
            if not isinstance(node, ast.Raise) or node.lineno in protocol:
                continue  # a mapping's `__getitem__` raises KeyError: the data model says so
            if (name := _raised(node)) is not None:
                sites[(module.where, name)].append(node.lineno)
    return sites


def outside_the_tree() -> set[tuple[str, str]]:
    """(file, class) of each exception class deriving from builtin exceptions only."""
    found = set()
    for module in modules().values():
        for node in ast.walk(module.tree):
            if not isinstance(node, ast.ClassDef) or node.name == "SessionizerError":
                continue
            bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
            builtin = [b for b in bases if b.endswith(("Error", "Exception")) and _builtin(b)]
            if builtin and len(builtin) == len(node.bases):
                found.add((module.where, node.name))
    return found


def _builtin(name: str) -> bool:
    return isinstance(getattr(builtins, name, None), type)


def test_the_library_raises_no_bare_builtin_exception() -> None:
    sites = bare_raises()
    unexpected = {
        f"{where}:{line}: raise {name}"
        for (where, name), lines in sites.items()
        if (where, name) not in DELIBERATE
        for line in lines
    }
    assert not unexpected, (
        "raise an exception of the project's tree instead (framework/kernel/errors.py, the "
        "package's errors.py; InvalidArgument or InvalidSetting where a ValueError is "
        f"expected): {sorted(unexpected)}"
    )


def test_the_allowlists_hold_only_live_sites() -> None:
    # An entry whose site is gone must go too, so the allowlists only ever shrink.
    assert not DELIBERATE - set(bare_raises())
    assert not DELIBERATE_CLASSES - outside_the_tree()


def test_every_exception_class_of_the_library_is_in_the_project_tree() -> None:
    strays = outside_the_tree() - DELIBERATE_CLASSES
    assert not strays, f"derive these from SessionizerError (or a subclass): {sorted(strays)}"


def test_the_value_errors_of_the_tree_are_still_value_errors() -> None:
    assert issubclass(InvalidSetting, ConfigError) and issubclass(InvalidSetting, ValueError)
    assert issubclass(InvalidArgument, SessionizerError) and issubclass(InvalidArgument, ValueError)
    assert issubclass(HookError, SessionError) and issubclass(HookError, ValueError)


def test_argparse_turns_the_value_errors_of_the_tree_into_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    def streams(text: str) -> int:
        raise InvalidArgument(f"not a stream count: {text}")

    parser = argparse.ArgumentParser(prog="p")
    parser.add_argument("--streams", type=streams)
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["--streams", "x"])
    assert exited.value.code == 2
    assert "argument --streams: invalid streams value: 'x'" in capsys.readouterr().err


# -- 2. one import path per public name ----------------------------------------------------


def test_a_module_exports_only_what_it_defines() -> None:
    reexports = [
        f"{m.where}: {name} (defined in {origin(m.name, name)[0]})"
        for m in modules().values()
        if m.exports is not None and not m.is_package and m.where not in GATHERING
        for name in m.exports
        if name not in m.defined and _in_library(origin(m.name, name)[0])
    ]
    assert not reexports, f"a second import path; export these where they are defined: {reexports}"


def test_a_package_exports_only_its_own_names_but_for_the_documented_facade() -> None:
    foreign = [
        f"{m.name}.{name} (defined in {home})"
        for m in modules().values()
        if m.is_package and m.exports
        for name in m.exports
        if (home := origin(m.name, name)[0]) != m.name
        and not home.startswith(f"{m.name}.")
        and (m.name, name) not in FACADE
    ]
    assert not foreign, f"import these from where they are defined instead: {foreign}"


def test_every_public_name_has_exactly_one_import_path() -> None:
    paths: dict[tuple[str, str], list[str]] = defaultdict(list)
    for m in modules().values():
        for name in m.exports or []:
            home = origin(m.name, name)
            if m.is_package and home != (m.name, name):
                paths[home].append(f"{m.name}.{name}")
    public = {home: found for home, found in paths.items() if _in_library(home[0])}
    assert public, "no package exports anything: the walk is broken"
    twice = {f"{h[0]}.{h[1]}": found for h, found in public.items() if len(found) > 1}
    assert not twice, f"exported by more than one package: {twice}"


def test_library_code_imports_each_name_from_the_module_that_defines_it() -> None:
    indirect = []
    for m in modules().values():
        for name, (source, imported) in m.imported.items():
            if not _in_library(source) or f"{source}.{imported}" in modules():
                continue  # another library's name, or a submodule
            home = origin(source, imported)
            if home[0] != source and _in_library(home[0]):
                indirect.append(f"{m.where}: {name} from {source}, defined in {home[0]}")
    assert not indirect, f"import these from their defining module: {indirect}"


def test_the_documented_paths_are_the_public_ones() -> None:
    assert framework.StreamProcessor is StreamProcessor  # the README's path
    assert sessionizer.Watermark is Watermark  # docs/testing.md's path
    assert "StreamProcessor" not in sessionizer.__all__
