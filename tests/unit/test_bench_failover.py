"""The failover benchmark's cases: every planned move with and without handover, kill -9 once."""

from __future__ import annotations

import argparse

from benchmarks.failover_modes import CASES, MODES, Case, _cases


def test_every_planned_move_runs_both_ways_and_kill_9_once() -> None:
    assert [(c.mode, c.handover) for c in CASES] == [
        ("kill -9", None),
        ("SIGTERM", True),
        ("SIGTERM", False),
        ("SIGTERM --drain", True),
        ("SIGTERM --drain", False),
        ("join", True),
        ("join", False),
    ]
    assert Case("kill -9", None).flags == ()
    assert Case("join", False).flags == ("--handover", "off") and Case("join", True).joining
    assert Case("SIGTERM", True).flags == ("--handover", "on")


def test_the_command_line_picks_cases() -> None:
    picked = _cases(argparse.Namespace(modes=["kill-9", "join"], handover=["off"]))
    assert picked == [Case("kill -9", None), Case(MODES["join"], False)]
