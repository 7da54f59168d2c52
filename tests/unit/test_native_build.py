"""`deploy/build_compiled.py`'s native step never fails the install: it says why instead."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from framework.kernel import compiled

ROOT = Path(__file__).resolve().parents[2]


def _build_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "build_compiled", ROOT / "deploy/build_compiled.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_without_cargo_the_build_has_no_native_modules_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = _build_script()
    monkeypatch.setattr(script.shutil, "which", lambda name: None)
    assert script.build_native(tmp_path) == (
        [],
        "no cargo on PATH (Rust from rustup.rs builds the native modules)",
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(shutil.which("cargo") is None, reason="no cargo on PATH")
def test_a_crate_that_does_not_build_is_named_and_the_others_still_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = _build_script()
    broken = tmp_path / "broken"
    (broken / "src").mkdir(parents=True)
    (broken / "Cargo.toml").write_text('[package]\nname = "broken"\nversion = "not a version"\n')
    (broken / "Cargo.lock").write_text("")
    out = tmp_path / "out"
    out.mkdir()
    wire = compiled.NATIVE["_sessionizer_wire"]
    monkeypatch.setattr(compiled, "NATIVE", {"_broken": str(broken), "_sessionizer_wire": wire})
    built, problem = script.build_native(out)  # the broken one first: sorted by module
    assert built == ["_sessionizer_wire"]
    assert problem is not None and problem.startswith(f"cargo could not build {broken}: ")
    assert [path.name.split(".")[0] for path in out.iterdir()] == ["_sessionizer_wire"]
