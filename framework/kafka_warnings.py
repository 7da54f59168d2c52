"""kafka-python's import-time DeprecationWarnings, filtered for every user of the project.

kafka-python 3 loads its 109 protocol schemas with `importlib.resources.read_text`,
deprecated since Python 3.11, while it is imported: 218 DeprecationWarnings (each
`read_text` call warns, naming kafka's module, and `read_text` calls `open_text`,
which warns naming `importlib.resources`), which a user's own pytest run shows.

Two places filter them: `framework/__init__.py` installs the filters, so they are
in place before any module of the project imports kafka-python; and this module
is a pytest plugin (entry point `pytest11` in pyproject.toml, loaded by pytest
wherever the package is installed), because pytest sets the filters afresh in
each phase of a run, dropping those a conftest's imports installed, and a user's
test may import kafka-python before the project.
"""

from __future__ import annotations

import warnings
from typing import Protocol

__all__ = [
    "KAFKA_IMPORT_WARNINGS",
    "filterwarnings_lines",
    "ignore_kafka_import_warnings",
    "pytest_configure",
]

KAFKA_IMPORT_WARNINGS = (
    ("read_text is deprecated", r"kafka\.protocol\.schemas\.load_json"),
    # Raised inside `read_text` itself, so it names importlib's module, not the caller:
    # whoever calls `read_text` still sees that call's own warning.
    ("open_text is deprecated", r"importlib\.resources\._legacy"),
)
"""(message prefix, module regex) of each DeprecationWarning filtered."""


class _PytestConfig(Protocol):
    """The part of `pytest.Config` the hook uses (a plain install has no pytest)."""

    def addinivalue_line(self, name: str, line: str) -> None: ...


def ignore_kafka_import_warnings() -> None:
    """Install the filters (idempotent: an identical filter replaces the previous one)."""
    for message, module in KAFKA_IMPORT_WARNINGS:
        warnings.filterwarnings(
            "ignore", message=message, category=DeprecationWarning, module=module
        )


def filterwarnings_lines() -> list[str]:
    """The same filters in pytest's `filterwarnings` syntax (`action:message:category:module`)."""
    return [f"ignore:{text}:DeprecationWarning:{module}" for text, module in KAFKA_IMPORT_WARNINGS]


def pytest_configure(config: _PytestConfig) -> None:
    """Pytest hook: add the filters to the run's own, which pytest applies in every phase."""
    for line in filterwarnings_lines():
        config.addinivalue_line("filterwarnings", line)
