"""A broken processor module is one line naming the file and line, or the missing module."""

from __future__ import annotations

from pathlib import Path

import pytest

from framework.kernel.errors import ConfigError
from framework.node.loader import load_processor


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def _error(spec: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load_processor(spec)
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def test_a_syntax_error_names_file_and_line(modules: Path) -> None:
    (modules / "proc_syntax.py").write_text("import os\n\ndef broken(:\n    pass\n")
    message = _error("proc_syntax:Thing")
    assert f"has a syntax error at {modules / 'proc_syntax.py'}:3" in message


def test_a_missing_import_inside_the_module_names_it_not_pythonpath(modules: Path) -> None:
    (modules / "proc_deps.py").write_text("import os\nimport no_such_dependency_xyz\n")
    message = _error("proc_deps:Thing")
    assert f"failed at {modules / 'proc_deps.py'}:2" in message
    assert "no_such_dependency_xyz" in message
    assert "PYTHONPATH" not in message


def test_an_exception_at_import_time_names_file_and_line(modules: Path) -> None:
    (modules / "proc_raises.py").write_text("X = 1\nY = {}['missing']\n")
    message = _error("proc_raises:Thing")
    assert f"raised KeyError at {modules / 'proc_raises.py'}:2" in message


def test_a_module_not_found_is_blamed_on_pythonpath(modules: Path) -> None:
    assert "is it on PYTHONPATH?" in _error("no_such_package_xyz.sub:Thing")
    (modules / "pkg_here").mkdir()
    (modules / "pkg_here" / "__init__.py").write_text("")
    assert "no module named 'pkg_here.absent'" in _error("pkg_here.absent:Thing")


def test_a_processor_whose_init_raises_names_file_and_line(modules: Path) -> None:
    """It ended the node with a bare traceback and exit 1."""
    (modules / "proc_init.py").write_text(
        "from framework import StreamProcessor\n\n\n"
        "class Views(StreamProcessor):\n"
        "    def __init__(self):\n"
        "        raise RuntimeError('no config file')\n\n"
        "    def open(self, key, fragment): return {}\n\n"
        "    def update(self, session, fragment): pass\n\n"
        "    def close(self, key, session): return session\n"
    )
    message = _error("proc_init:Views")
    assert (
        f"processor proc_init:Views raised RuntimeError at {modules / 'proc_init.py'}:6 "
        "while being created: no config file"
    ) in message


def test_a_setting_the_framework_refuses_is_blamed_on_the_users_class_line(modules: Path) -> None:
    """The location was the framework's own check (sessionizer/processor.py), not the class."""
    (modules / "proc_setting.py").write_text(
        "from sessionizer.examples.weblog import WebSessions\n\n\n"
        "class Views(WebSessions):\n"
        "    timeout = -5\n"
    )
    message = _error("proc_setting:Views")
    assert f"raised ProcessorError at {modules / 'proc_setting.py'}:4 " in message
    assert "Views.timeout must be a positive number of seconds, got -5" in message
