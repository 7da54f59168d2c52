"""Shared fixtures: real servers come from the project's pytest plugin."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["framework.testing"]

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
