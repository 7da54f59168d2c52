"""The compiled hot path: selected as asked, and the engine's own unit tests pass on it.

`SESSIONIZER_HOT_PATH=compiled` runs the mypyc build of the engine's modules
(`framework.kernel.compiled`); a process picks its path when it starts, so the unit
tests of those modules run once more in a `pytest` child process with the variable
set (`ON_COMPILED`, but for `LEFT_OUT`: crashes on random streams are left to
test_hot_path_equivalence.py, which compares the two paths' bytes on random streams
with crashes and handovers).  This process itself runs whatever its environment
asked for, and says so.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from framework.kernel import compiled
from framework.testing.hot_path_runs import ROOT, require_compiled

MODULES = compiled.MODULES
ON_COMPILED = (
    "tests/unit/test_engine.py",
    "tests/unit/test_engine_fold.py",
    "tests/unit/test_engine_future_property.py",
    "tests/unit/test_engine_limits.py",
    "tests/unit/test_engine_state.py",
    "tests/unit/test_engine_truncation.py",
    "tests/unit/test_tracker.py",
    "tests/unit/test_node_task.py",
    "tests/unit/test_handover_engine.py",
    "tests/unit/test_dead_letter_visibility.py",
    "tests/unit/test_declarative.py",
    "tests/unit/test_declarative_weblog.py",
    "tests/unit/test_wire.py",
    "tests/unit/test_session_json.py",
    "tests/unit/test_producer.py",
    "tests/unit/test_producer_watermarks.py",
    "tests/unit/test_producer_ids.py",
    "tests/unit/test_resize_producer.py",
    "tests/unit/test_hot_path_compiled.py::test_this_process_runs_the_path_it_asked_for",
)
"""The unit tests of the compiled modules (the producer's too), the wire decoder's and the
session JSON's (their native fast paths run on the compiled path) and this file's check
that they are compiled."""
LEFT_OUT = (
    # Crashes on random streams: the equivalence test runs them on both paths and compares
    # the bytes; here they would add 25 s to CI.
    "test_crash_and_resume_gives_exactly_the_uninterrupted_output",
    "test_truncation_replays_identically_after_crashes",
    # It reads the engine's attributes with vars(), which a compiled (native) class has not.
    "test_every_attribute_of_the_engine_survives_a_handover",
)


def test_this_process_runs_the_path_it_asked_for() -> None:
    chosen = compiled.choice()
    files = {name: str(importlib.import_module(name).__file__) for name in MODULES}
    if chosen.path == "python":
        assert all(file.endswith(".py") for file in files.values()), files
        if chosen.requested == "compiled":
            require_compiled(chosen.reason)
        return
    assert set(chosen.modules) == set(MODULES)
    build = compiled.default_build_dir().resolve()
    assert all(Path(file).parent.is_relative_to(build) for file in files.values()), files


def test_an_unknown_path_runs_python_and_says_why() -> None:
    child = subprocess.run(
        [sys.executable, "-c", "from framework.kernel import compiled; print(compiled.choice())"],
        env={**os.environ, compiled.ENV: "fast"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "path='python'" in child.stdout
    assert "must be one of auto, compiled, python" in child.stdout


def _choice_in_child(**env: str) -> str:
    """`compiled.choice()` of a fresh process whose environment lacks SESSIONIZER_HOT_PATH."""
    base = {name: value for name, value in os.environ.items() if name != compiled.ENV}
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            "from framework.kernel import compiled; c = compiled.choice(); print(c, c.as_asked)",
        ],
        env={**base, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return child.stdout.strip()


def test_by_default_a_process_runs_the_build_when_it_can() -> None:
    default = _choice_in_child()
    assert "requested='auto'" in default and default.endswith("True"), default
    if "path='compiled'" not in default:
        require_compiled(default)


def test_by_default_a_process_without_a_build_runs_python_and_says_why(tmp_path: Path) -> None:
    default = _choice_in_child(**{compiled.DIR_ENV: str(tmp_path / "nothing")})
    assert "requested='auto', path='python'" in default, default
    assert "no build at" in default and default.endswith("True"), default
    asked = _choice_in_child(
        **{compiled.DIR_ENV: str(tmp_path / "nothing"), compiled.ENV: "compiled"}
    )
    assert "requested='compiled', path='python'" in asked and asked.endswith("False"), asked


def test_by_default_a_stale_build_runs_python_and_is_not_what_was_meant(tmp_path: Path) -> None:
    build = compiled.default_build_dir().resolve()
    problem = compiled.build_problem(build)
    if problem is not None:
        require_compiled(problem)
    stale = tmp_path / "compiled"
    shutil.copytree(build, stale)
    manifest = json.loads((stale / compiled.MANIFEST).read_text())
    first = sorted(manifest["sources"])[0]
    manifest["sources"][first] = "0" * 64  # as if the source changed since the build
    (stale / compiled.MANIFEST).write_text(json.dumps(manifest))
    default = _choice_in_child(**{compiled.DIR_ENV: str(stale)})
    assert "requested='auto', path='python'" in default, default
    assert f"stale: {first} changed" in default and default.endswith("False"), default


def test_a_stale_or_missing_build_runs_python_and_says_why(tmp_path: Path) -> None:
    problem = compiled.build_problem(tmp_path / "nothing")
    assert problem is not None and problem.startswith("no build at")
    (tmp_path / "compiled.failed").write_text("no C compiler (gcc is not on PATH)\n")
    problem = compiled.build_problem(tmp_path / "compiled")
    assert problem == "the last build failed (no C compiler (gcc is not on PATH))"


def test_the_engine_unit_tests_pass_on_the_compiled_path() -> None:
    check = subprocess.run(
        [sys.executable, "-c", "from framework.kernel import compiled; print(compiled.choice())"],
        env={**os.environ, compiled.ENV: "compiled"},
        capture_output=True,
        text=True,
        check=True,
    )
    if "path='compiled'" not in check.stdout:
        require_compiled(check.stdout.strip())
    child = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--durations=5",
            "-k",
            " and ".join(f"not {name}" for name in LEFT_OUT),
            *ON_COMPILED,
        ],
        cwd=ROOT,
        env={**os.environ, compiled.ENV: "compiled"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    print(child.stdout[-3000:])  # shown by pytest -rP
    assert child.returncode == 0, child.stdout[-8000:] + child.stderr[-2000:]
