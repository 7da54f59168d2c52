"""Run the `sessionizer` CLI in-process (for tests), and where the shared real logs are."""

from __future__ import annotations

import contextlib
import gc
import io
import json
from pathlib import Path
from typing import Any

from framework.cli import main

__all__ = ["DATA", "cli", "cli_json"]

DATA = Path(__file__).resolve().parents[2] / "tests" / "data"
"""The real logs vendored in this repository (`tests/data`, see its README)."""


def cli(*argv: str, zk: str, bootstrap: str, app: str) -> tuple[int, str, str]:
    """Run `sessionizer ARGV` in-process; return (exit code, stdout, stderr).

    `produce` and `generate` set the process's collector as their own process's
    (`framework.node.collector`); the test process gets its own back afterwards.
    """
    out, err = io.StringIO(), io.StringIO()
    threshold, frozen = gc.get_threshold(), gc.get_freeze_count()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([*argv, "--zk", zk, "--bootstrap", bootstrap, "--app", app])
    finally:
        gc.set_threshold(*threshold)
        if not frozen:
            gc.unfreeze()
    return code, out.getvalue(), err.getvalue()


def cli_json(*argv: str, zk: str, bootstrap: str, app: str) -> dict[str, Any]:
    """Run a command that ends with a JSON line; assert success and return it parsed."""
    code, out, err = cli(*argv, zk=zk, bootstrap=bootstrap, app=app)
    assert code == 0, f"sessionizer {' '.join(argv)} exited {code}: {err[-2000:]}"
    parsed: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return parsed
