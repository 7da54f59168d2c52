"""Processors used only by the tests (imported by node processes through PYTHONPATH)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sessionizer.examples.weblog import WebSessions

__all__ = ["FragileWebSessions"]


class FragileWebSessions(WebSessions):
    """WebSessions whose `update` raises on the path `/poison`: a poison fragment."""

    def update(self, session: Any, fragment: Mapping[str, Any]) -> Any | None:
        """Fail on purpose for the poison path."""
        if fragment.get("path") == "/poison":
            raise ValueError("poison fragment")
        return super().update(session, fragment)
