"""Shared fixtures: real servers come from the project's pytest plugin."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from framework.kernel import compiled

pytest_plugins = ["framework.testing"]

# This process runs the reference, the Python path, unless the environment asks otherwise:
# the engine's unit tests here test it, and test_hot_path_compiled.py runs them again in a
# child on the compiled path.  The processes the tests start (nodes) are not pinned: they
# run the default, `auto`, which is the compiled path once `make install` has built it.
if compiled.ENV not in os.environ:
    os.environ[compiled.ENV] = "python"
    compiled.choice()  # decided once per process, now
    del os.environ[compiled.ENV]

# No test here times anything (docs/testing.md): a property test judged by Hypothesis's
# default 200 ms deadline, or its too-slow health check, failed on a loaded CI machine.
settings.register_profile("untimed", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("untimed")

# Not imported from framework.testing: importing the plugin here, before pytest registers it,
# would keep pytest from rewriting its asserts.
DATA = Path(__file__).resolve().parent / "data"
REAL_LOGS = ("apache_logs", "auth.log")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Fail the run, never skip, when a vendored real log is missing (tests/data/README.md)."""
    missing = [name for name in REAL_LOGS if not (DATA / name).is_file()]
    if missing:
        raise pytest.UsageError(
            f"the real logs {missing} are missing from {DATA}: they are part of the "
            "repository (tests/data/README.md); restore them with `git checkout -- tests/data`"
        )
