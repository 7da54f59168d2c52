"""The README's "session key" example: a format that re-keys apache lines by client IP."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from framework.testing.cli import DATA
from framework.testing.docs import README
from router.formats import parse_file


def _key_example() -> tuple[str, str]:
    """The `byip.py` block of the README's processor section, and the command after it."""
    section = README.read_text().split("## Your own processor", 1)[1].split("\n## ", 1)[0]
    module = next(b for b in re.findall(r"```python\n(.*?)```", section, re.DOTALL) if "byip" in b)
    command = re.search(r"```sh\n(.*?)```", section.split(module, 1)[1], re.DOTALL)
    assert command is not None, "the byip.py example is followed by its command line"
    return module, command[1]


def test_the_readme_says_where_the_key_comes_from() -> None:
    section = README.read_text().split("## Your own processor", 1)[1].split("\n## ", 1)[0]
    assert "session key is not the processor's choice" in section
    assert "--format MODULE:NAME" in section


def test_the_rekeying_format_keys_the_real_apache_log_by_ip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module, command = _key_example()
    assert module.startswith("# byip.py\n")
    assert "--format byip:by_ip" in command and command.startswith("PYTHONPATH=. sessionizer ")
    (tmp_path / "byip.py").write_text(module)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "byip", raising=False)
    try:
        fragments = parse_file(DATA / "apache_logs", "byip:by_ip")
        built_in = parse_file(DATA / "apache_logs", "apache")
    finally:
        sys.modules.pop("byip", None)
    assert len(fragments) == len(built_in) > 9_000
    assert all(f.key == f.fields["ip"] for f in fragments)
    # Fewer session keys than the built-in's IP and user agent: that is the point.
    assert len({f.key for f in fragments}) < len({f.key for f in built_in})
