"""Compile the node's hot path with mypyc into build/compiled/ (`SESSIONIZER_HOT_PATH=compiled`).

    .venv/bin/python deploy/build_compiled.py [--out build/compiled] [--opt-level 1]
        [--modules sessionizer/engine.py ...] [--strict]

`make install` runs it (docs/nodes.md, "The compiled hot path"); 15-25 s of CPU.
It compiles `framework.kernel.compiled.MODULES` (the session engine, its due queues,
the key timelines and their sessions, the hook glue and the safe-offset tracker) with
mypyc (from the `test` extra) into C extension modules of the same names under `--out`, outside the
source packages: the `.py` files stay what runs by default, and
`framework.kernel.compiled` puts the build first on the packages' `__path__` only in
a process started with `SESSIONIZER_HOT_PATH=compiled`.

Then it builds the Rust crates of `framework.kernel.compiled.NATIVE` (the fast paths
of the wire decoder, `router/native`, of the session JSON, `sessionizer/native`, and
of the records built per session, `sessionizer/native_records`) with cargo into native
modules beside them (PyO3, from crates.io; `build/cargo` keeps cargo's work between
builds, and a build without the network uses crates cargo
fetched before).  Without cargo, or for a crate that does not build, the build has
no such module and the manifest says why (`native_problem`): the compiled path runs
with the Python code in its place.

`--out` receives the extension modules, mypyc's shared library and `manifest.json`:
the modules, the library's name, the native modules, this interpreter's extension
suffix and the SHA-256 of every project source the compiled code was type-checked
against (the modules and what they import, transitively) and of the crates' sources; a
process finds the build stale, and runs the Python modules, when one of them changed.
`<out>.deps` tells make the same list (the Makefile rebuilds when one changes).

It never fails the install: without mypyc, a C compiler or Python's headers, or
when the compilation fails, it removes the build, writes why to `<out>.failed`
(the node logs it beside `hot_path`) and exits 0; `--strict` exits 1 instead.

Code in the compiled modules is mypyc's Python: a call's result is checked against
its declared type (a user's hook is called through `sessionizer.hooks`, its result
taken as `Any`); classes are native (no `__dict__`, no attributes set from outside,
no Python subclasses, methods not patched); a subclass of `list` needs
`@mypyc_attr(native_class=False)`.  tests/unit/test_hot_path_compiled.py runs the
modules' unit tests compiled, test_hot_path_equivalence.py compares both paths' bytes.
"""

from __future__ import annotations

import argparse
import ast
import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from framework.kernel import compiled  # noqa: E402
from framework.kernel.compiled import FAILED, MANIFEST, digest, missing_tools  # noqa: E402

MODULES = tuple(f"{name.replace('.', '/')}.py" for name in compiled.MODULES)
PACKAGES = ("framework", "router", "balancer", "state", "sessionizer")
CARGO_TARGET = ROOT / "build" / "cargo"
OPT_LEVEL = "1"
"""The C compiler's -O (`MYPYC_OPT_LEVEL` or `--opt-level` choose another): 1 compiles in
half the time of mypyc's default 3 and measured as fast; 0 is slower than Python
(benchmarks/HOT_PATH.md)."""


def _module_file(name: str) -> Path | None:
    """The source of a project module, or None (another library's, or a package: the
    library imports each name from the module that defines it, not from a package)."""
    if name.split(".")[0] not in PACKAGES:
        return None
    source = ROOT.joinpath(*name.split(".")).with_suffix(".py")
    return source if source.is_file() else None


def _imports(source: Path) -> set[str]:
    """The modules a source imports (every import statement, at any depth)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source.read_bytes(), str(source))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)  # and `from package import module`:
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def sources(modules: list[Path]) -> list[Path]:
    """The compiled modules and every project source they import, transitively (sorted)."""
    seen: set[Path] = set()
    todo = list(modules)
    while todo:
        source = todo.pop()
        if source in seen:
            continue
        seen.add(source)
        for name in _imports(source):
            found = _module_file(name)
            if found is not None and found not in seen:
                todo.append(found)
    return sorted(seen)


def crate_sources() -> list[Path]:
    """The files of the native crates a build depends on (manifests, lock files, Rust)."""
    found: list[Path] = []
    for crate in sorted(set(compiled.NATIVE.values())):
        folder = ROOT / crate
        found += [folder / "Cargo.toml", folder / "Cargo.lock", *sorted(folder.rglob("*.rs"))]
    return found


def _cargo(crate: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYO3_PYTHON": sys.executable, "CARGO_TARGET_DIR": str(CARGO_TARGET)}
    command = ["cargo", "build", "--release", "--locked", *flags]
    return subprocess.run(
        [*command, "--manifest-path", str(crate / "Cargo.toml")],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def build_native(out: Path) -> tuple[list[str], str | None]:
    """Build the native modules into `out`: (their names, why some could not be built)."""
    if shutil.which("cargo") is None:
        return [], "no cargo on PATH (Rust from rustup.rs builds the native modules)"
    built: list[str] = []
    problems: list[str] = []
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    for module, crate in sorted(compiled.NATIVE.items()):
        folder = ROOT / crate
        started = time.monotonic()
        try:
            done = _cargo(folder)
            if done.returncode != 0:  # no network: the crates fetched by an earlier build
                done = _cargo(folder, "--offline")
        except (OSError, subprocess.TimeoutExpired) as exc:
            problems.append(f"cargo could not build {crate}: {exc}")
            continue
        if done.returncode != 0:
            last = [line for line in done.stderr.splitlines() if line.strip()][-3:]
            problems.append(f"cargo could not build {crate}: {' / '.join(last)}")
            continue
        library = tomllib.loads((folder / "Cargo.toml").read_text(encoding="utf-8"))["lib"]
        shutil.copyfile(
            CARGO_TARGET / "release" / f"lib{library['name']}.so", out / (module + suffix)
        )
        built.append(module)
        print(
            f"build_compiled: {crate} built in {time.monotonic() - started:.0f} s", file=sys.stderr
        )
    return built, "; ".join(problems) or None


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def _compile(modules: list[Path], out: Path, work: Path, opt_level: str) -> str:
    """Build the extension modules into `out`; return mypyc's shared library's module name."""
    import setuptools
    from mypyc.build import mypycify

    started = time.monotonic()
    extensions = mypycify(
        ["--config-file", str(ROOT / "pyproject.toml"), *(str(m) for m in modules)],
        opt_level=opt_level,
        debug_level="0",
        target_dir=str(work / "c"),
    )
    # A Distribution, not setup(): setup() would read pyproject.toml's [project] too.
    dist = setuptools.Distribution({"name": "sessionizer-hot-path", "ext_modules": extensions})
    dist.script_name = "build_compiled"
    dist.script_args = [
        "--quiet",
        "build_ext",
        "--build-lib",
        str(out),
        "--build-temp",
        str(work / "obj"),
    ]
    generated = time.monotonic()
    dist.parse_command_line()
    dist.run_commands()
    print(
        f"build_compiled: mypyc {generated - started:.0f} s, "
        f"C compiler {time.monotonic() - generated:.0f} s",
        file=sys.stderr,
    )
    names = {_module_name(m) for m in modules}
    runtime = [e.name for e in extensions if e.name not in names]
    if len(runtime) != 1:
        raise RuntimeError(f"expected one mypyc library besides the modules, got {runtime}")
    return runtime[0]


def build(out: Path, modules: list[Path], opt_level: str) -> str | None:
    """Compile `modules` into `out` (replacing it); return why it failed, or None."""
    failed = out.with_name(out.name + FAILED)
    failed.unlink(missing_ok=True)
    shutil.rmtree(out, ignore_errors=True)
    problem = missing_tools()
    if problem is not None:
        return problem
    staging, work = out.with_name(out.name + ".new"), out.with_name(out.name + ".work")
    for directory in (staging, work):
        shutil.rmtree(directory, ignore_errors=True)
    started = time.monotonic()
    cwd = Path.cwd()
    os.chdir(ROOT)  # mypy reads pyproject.toml's [tool.mypy] here; module names from here
    try:
        runtime = _compile(modules, staging, work, opt_level)
    except (Exception, SystemExit) as exc:  # mypyc exits on a type error, gcc raises
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return f"mypyc or the C compiler failed: {detail}"
    finally:
        os.chdir(cwd)
        shutil.rmtree(work, ignore_errors=True)
    used = sources(modules) + crate_sources()
    native, native_problem = build_native(staging)
    manifest = {
        "modules": sorted(_module_name(m) for m in modules),
        "runtime": runtime,
        "native": native,
        "native_problem": native_problem,
        "suffix": importlib.machinery.EXTENSION_SUFFIXES[0],
        "python": sys.version,
        "opt_level": opt_level,
        "seconds": round(time.monotonic() - started, 1),
        "sources": {str(p.relative_to(ROOT)): digest(p) for p in used},
    }
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    staging.rename(out)
    return None


def _deps(out: Path, modules: list[Path]) -> None:
    """`<out>.deps`: make's view of what the build depends on (each file a target too)."""
    stamp = out.with_name(out.name + ".stamp")
    files = [str(p.relative_to(ROOT)) for p in sources(modules) + crate_sources()]
    lines = [f"{stamp.relative_to(ROOT)}: {' '.join(files)}", *(f"{f}:" for f in files)]
    out.with_name(out.name + ".deps").write_text("\n".join(lines) + "\n", encoding="utf-8")
    stamp.touch()


def main(argv: list[str] | None = None) -> int:
    """Build; report on stderr; exit 0 unless `--strict` and the build failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "compiled")
    parser.add_argument("--opt-level", default=os.environ.get("MYPYC_OPT_LEVEL", OPT_LEVEL))
    parser.add_argument("--modules", nargs="+", default=list(MODULES))
    parser.add_argument("--strict", action="store_true", help="exit 1 when the build fails")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    modules = [(ROOT / m).resolve() for m in args.modules]
    started = time.monotonic()
    problem = build(out, modules, args.opt_level)
    seconds = time.monotonic() - started
    if out.is_relative_to(ROOT):
        _deps(out, modules)
    if problem is None:
        names = ", ".join(_module_name(m) for m in modules)
        print(f"build_compiled: {names} compiled into {out} in {seconds:.0f} s", file=sys.stderr)
        native_problem = json.loads((out / MANIFEST).read_text(encoding="utf-8"))["native_problem"]
        if native_problem is not None:
            print(f"build_compiled: native modules missing ({native_problem})", file=sys.stderr)
            return 1 if args.strict else 0
        return 0
    out.with_name(out.name + FAILED).write_text(problem + "\n", encoding="utf-8")
    print(
        f"build_compiled: no compiled hot path ({problem}); SESSIONIZER_HOT_PATH=compiled "
        "runs the Python modules",
        file=sys.stderr,
    )
    return 1 if args.strict else 0


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    os._exit(code)  # not sys.exit: freeing mypy's build graph at exit takes ~10 s
