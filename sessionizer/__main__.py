"""`python -m sessionizer`: the `sessionizer` command, for when its script is not on PATH."""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> int:
    """Run the `sessionizer` command line with this process's arguments."""
    # The console entry point: the one place `sessionizer` (the engine, a lower layer)
    # may import `framework`, and only when run, never when imported.
    from framework.cli import main as cli_main

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
