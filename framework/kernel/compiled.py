"""Which implementation of the node's per-record modules a process runs: compiled or Python.

`SESSIONIZER_HOT_PATH=compiled` runs the modules that `deploy/build_compiled.py`
compiled with mypyc (`make install` builds them into `build/compiled/` of the source
tree; `SESSIONIZER_COMPILED_DIR` names another build): the session engine, its open
sessions and their queues, the key timelines, the hook glue and the safe-offset
tracker (`MODULES`), as C extension modules of the same names, and beside them the
native modules built from Rust (`NATIVE`: the fast paths of the wire decoder, of the
session JSON and of the records built per session), which the Python modules use when
this process runs compiled (`native`).
`python` runs the `.py` files: the reference, which the compiled modules are built
from and tested against (tests/unit/test_hot_path_equivalence.py).  `auto`, the
default, runs the build when there is one that can run here, else Python, and says why.

The choice is made once per process, at the first import of a package that holds a
compiled module (`state`, `sessionizer`, `framework.node`): each package's `__init__`
passes its `__path__` through `package_path` before it imports anything else, which
puts the build's folder of that package first, so that `import sessionizer.engine`
finds the extension module; mypyc's shared library (the code of all of them) is put
at the end of `sys.path`.  A build that is absent, failed, made for another Python or
from other sources than the `.py` files it was compiled from (stale) is not used: the
process runs the Python path and `choice().reason` says why (the node logs it, the
`hot_path` event).  This module imports nothing of the project.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import json
import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Final, Literal, TypeAlias

__all__ = [
    "AUTO",
    "DIR_ENV",
    "ENV",
    "FAILED",
    "MANIFEST",
    "NATIVE",
    "PATHS",
    "Choice",
    "HotPath",
    "build_problem",
    "choice",
    "default_build_dir",
    "digest",
    "missing_tools",
    "native",
    "package_path",
    "source_root",
]

HotPath: TypeAlias = Literal["compiled", "python"]
PATHS: Final[tuple[HotPath, ...]] = ("compiled", "python")
AUTO: Final = "auto"
"""The default request: the compiled path when a build can run, else Python."""
ENV: Final = "SESSIONIZER_HOT_PATH"
DIR_ENV: Final = "SESSIONIZER_COMPILED_DIR"
MANIFEST: Final = "manifest.json"
MODULES: Final = (
    "sessionizer.engine",
    "sessionizer.open_sessions",
    "sessionizer.due_queue",
    "sessionizer.timeline",
    "sessionizer.segment",
    "sessionizer.producer_clocks",
    "sessionizer.hooks",
    "sessionizer.declarative_conditions",
    "sessionizer.declarative_folds",
    "state.tracker",
    "router.fragment_path",
    "router.watermarks",
)
"""What is compiled, chosen by measurement (benchmarks/HOT_PATH.md): compiling the
stream task (framework/node/task.py) or the wire decoder as well measured no faster;
the producer clocks, asked twice per fragment, 3 % fewer instructions (round 9); the
producer's per-fragment path and watermark policy, 56 % fewer instructions of its own
per fragment (round 13).  A module of another package needs that package's `__init__`
to pass its `__path__` through `package_path` (framework.node's and router's do)."""
"""In the build directory: the compiled modules, mypyc's library, and the sources' digests."""
NATIVE: Final = {
    "_sessionizer_wire": "router/native",
    "_sessionizer_json": "sessionizer/native",
    "_sessionizer_records": "sessionizer/native_records",
}
"""The native modules a build holds when Rust can build them, and each one's crate: the
fast paths of the wire decoder (router/wire.py), of the session JSON
(sessionizer/sinks.py) and of the records built per session (`session_id`, and the
frozen records through `framework.kernel.frozen.native_slot_builder`).  The Python code
stays the reference and decides everything a fast path gives back."""
FAILED: Final = ".failed"
"""Beside the build directory, `<build>.failed` (`build/compiled.failed`): why the last
build failed, written by `deploy/build_compiled.py` instead of a build."""


@dataclass(frozen=True)
class Choice:
    """The hot path of this process: what was asked, what runs, and why."""

    requested: str
    """What `SESSIONIZER_HOT_PATH` asks for (`AUTO` when unset)."""
    path: HotPath
    """What runs."""
    reason: str
    """Why this path runs (the build used, or why it was not)."""
    modules: tuple[str, ...] = ()
    """The compiled modules, when `path` is compiled."""
    build_unusable: bool = False
    """A build is there but cannot run here (stale, for another Python, does not load)."""
    native: tuple[str, ...] = ()
    """The native modules of the build, when `path` is compiled (none where Rust could not
    build them: `reason` says why)."""

    @property
    def as_asked(self) -> bool:
        """False when a request for one path got the other, or `auto` found a build it could
        not run (a node warns: a stale build runs Python where compiled was meant to)."""
        if self.requested == AUTO:
            return not self.build_unusable
        return self.requested == self.path


def source_root() -> Path:
    """The directory holding the project's packages (the repository, for an editable install)."""
    return Path(__file__).resolve().parents[2]


def default_build_dir() -> Path:
    """Where the compiled modules are: `SESSIONIZER_COMPILED_DIR`, else `build/compiled/`."""
    named = os.environ.get(DIR_ENV)
    return Path(named) if named else source_root() / "build" / "compiled"


def digest(path: Path) -> str:
    """The SHA-256 of a file's bytes (how a build names the sources it was compiled from)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def missing_tools() -> str | None:
    """Why this machine cannot build the compiled modules (no mypyc, C compiler or Python
    headers), or None if it can."""
    if importlib.util.find_spec("mypyc") is None:
        return "mypyc is not installed (it comes with mypy: pip install -e '.[test]')"
    compiler = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        return f"no C compiler ({compiler} is not on PATH)"
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not headers.is_file():
        return f"no Python headers ({headers} is missing: install python3-dev)"
    return None


def _suffix() -> str:
    """The file-name ending of this interpreter's extension modules."""
    return importlib.machinery.EXTENSION_SUFFIXES[0]


def build_problem(build: Path) -> str | None:
    """Why the build in `build` cannot run in this process, or None if it can."""
    manifest = build / MANIFEST
    if not manifest.is_file():
        failed = build.with_name(build.name + FAILED)
        if failed.is_file():
            why = failed.read_text(encoding="utf-8", errors="replace").strip().splitlines()
            return f"the last build failed ({why[0] if why else 'no reason given'})"
        return f"no build at {build} (make install, or python deploy/build_compiled.py)"
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
        modules, sources, runtime = data["modules"], data["sources"], data["runtime"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"unreadable {manifest}: {exc}"
    suffix = _suffix()
    if data.get("suffix") != suffix:
        return f"built for another Python ({data.get('suffix')}, this one loads {suffix})"
    # A native module that is missing only loses its fast path (`_load_native`).
    for module in [*modules, runtime]:
        if not (build / (module.replace(".", "/") + suffix)).is_file():
            return f"{module}{suffix} is missing from {build}"
    root = source_root()
    for name, expected in sorted(sources.items()):
        source = root / name
        if not source.is_file() or digest(source) != expected:
            return f"stale: {name} changed since the build (make install rebuilds it)"
    return None


def _decide() -> Choice:
    requested = os.environ.get(ENV) or AUTO
    if requested == "python":
        return Choice(requested, "python", "the reference, as asked")
    if requested not in (AUTO, "compiled"):
        return Choice(requested, "python", f"{ENV} must be one of {AUTO}, {', '.join(PATHS)}")
    build = default_build_dir().resolve()
    problem = build_problem(build)
    if problem is not None:
        # A build that failed (no C compiler) or is absent is this machine's way; one that
        # is there but cannot run is a mistake to point out.
        return Choice(requested, "python", problem, build_unusable=(build / MANIFEST).is_file())
    data = json.loads((build / MANIFEST).read_text(encoding="utf-8"))
    if str(build) not in sys.path:
        sys.path.append(str(build))
    try:  # mypyc's library: the code of every compiled module (and its runtime)
        importlib.import_module(data["runtime"])
    except ImportError as exc:
        return Choice(requested, "python", f"the build does not load: {exc}", build_unusable=True)
    native, native_problem = _load_native(build, data)
    reason = f"mypyc build at {build}"
    if native:
        reason += f", native {', '.join(native)}"
    if native_problem is not None:
        reason += f", native modules missing ({native_problem})"
    return Choice(requested, "compiled", reason, tuple(data["modules"]), native=native)


def _load_native(build: Path, manifest: dict[str, Any]) -> tuple[tuple[str, ...], str | None]:
    """Import the build's native modules: (those that load, why the others are missing).

    One that is missing or does not load (a build copied to another machine) leaves its
    Python code in its place, as a crate that did not build does.
    """
    loaded: list[str] = []
    problems = [manifest["native_problem"]] if manifest.get("native_problem") else []
    for name in manifest.get("native", ()):
        if not (build / (name + _suffix())).is_file():
            problems.append(f"{name} is missing from {build}")
            continue
        try:
            importlib.import_module(name)
        except ImportError as exc:
            problems.append(f"{name} does not load: {exc}")
            continue
        loaded.append(name)
    if not loaded and not problems:
        problems.append("none built")
    return tuple(loaded), "; ".join(problems) or None


_choice: Choice | None = None


def choice() -> Choice:
    """The hot path of this process, decided at the first call (from the environment)."""
    global _choice
    if _choice is None:
        _choice = _decide()
    return _choice


def native(name: str) -> ModuleType | None:
    """The build's native module `name` when this process runs compiled, else None."""
    chosen = choice()
    if chosen.path != "compiled" or name not in chosen.native:
        return None
    return importlib.import_module(name)


def package_path(package: str, path: list[str]) -> list[str]:
    """`package`'s `__path__`, with the build's folder of it first when compiled modules run."""
    chosen = choice()
    if chosen.path != "compiled" or not any(m.startswith(package + ".") for m in chosen.modules):
        return path
    folder = str(default_build_dir().resolve().joinpath(*package.split(".")))
    return [folder, *path]
