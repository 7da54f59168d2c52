"""A user's own pytest run, without this repository's config, shows none of kafka-python's
import-time DeprecationWarnings (218 of them: `framework.kafka_warnings`)."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from framework.kafka_warnings import KAFKA_IMPORT_WARNINGS, filterwarnings_lines

ROOT = Path(__file__).resolve().parents[2]

USER_TEST = """
import kafka
from kafka.errors import KafkaError

from framework import StreamProcessor
from framework.testkit import assert_exact, frag


class Clicks(StreamProcessor):
    timeout = 60

    def open(self, key, fragment):
        return {"n": 0}

    def update(self, session, fragment):
        session["n"] += 1

    def close(self, key, session):
        return session


def test_my_processor():
    result = assert_exact(Clicks(), [frag("ann", 0), frag("ann", 1_000)])
    assert [s.result for s in result.sessions] == [{"n": 2}]
    assert kafka.TopicPartition("t", 0).partition == 0 and issubclass(KafkaError, Exception)
"""


def user_pytest(tmp_path: Path, conftest: str | None) -> str:
    """Run pytest as a user would, on a tiny test file, without this repository's config."""
    (tmp_path / "test_mine.py").write_text(USER_TEST)
    if conftest is not None:
        (tmp_path / "conftest.py").write_text(conftest)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-c", os.devnull,
         "--rootdir", str(tmp_path), "test_mine.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    return output


@pytest.mark.parametrize(
    "conftest",
    [
        None,  # the test file imports kafka-python itself, before the project
        # The docs' way to get the fixtures: `framework` is then imported while pytest
        # loads the conftest, and pytest drops the filters that import installed.
        'pytest_plugins = ["framework.testing"]\n',
    ],
    ids=["kafka-imported-first", "with-the-fixtures-plugin"],
)
def test_a_users_pytest_run_shows_no_deprecation_warning(
    tmp_path: Path, conftest: str | None
) -> None:
    output = user_pytest(tmp_path, conftest)
    assert "1 passed" in output
    assert "DeprecationWarning" not in output and "warning" not in output, output[-3000:]


def test_the_filters_are_narrow() -> None:
    """Only these messages, from those modules: other DeprecationWarnings still show."""
    assert filterwarnings_lines() == [
        r"ignore:read_text is deprecated:DeprecationWarning:kafka\.protocol\.schemas\.load_json",
        r"ignore:open_text is deprecated:DeprecationWarning:importlib\.resources\._legacy",
    ]
    assert len(KAFKA_IMPORT_WARNINGS) == 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import framework.kafka_warnings as filters

        filters.ignore_kafka_import_warnings()
        warnings.warn("read_text is deprecated (mine)", DeprecationWarning, stacklevel=1)
        warnings.warn("something else is deprecated", DeprecationWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == [
        "read_text is deprecated (mine)",
        "something else is deprecated",
    ]


def test_the_plugin_is_registered_with_pytest() -> None:
    plugins = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="pytest11")}
    assert plugins.get("sessionizer-kafka-warnings") == "framework.kafka_warnings", (
        "the installed package predates the pytest11 entry point: reinstall it (make install)"
    )
