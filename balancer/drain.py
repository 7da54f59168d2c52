"""`DrainPace`: when each step of a drain is due (`Balancer.drain`).

A drain of N streams over `seconds` releases one stream per step.  Step k is
due at the drain's start plus k times `seconds / N`, counted from the start
rather than from the end of the step before, so the steps' own work (commit,
handover, release) does not add up: the drain ends within its period plus one
step's work.  A step that runs late (a pause, a slow release) is followed at
once by the steps that fell due meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DrainPace"]


@dataclass
class DrainPace:
    """The schedule of one drain: its start, the interval between steps, the steps done."""

    start: float
    interval: float
    steps: int = 0

    @classmethod
    def over(cls, seconds: float, streams: int, now: float) -> DrainPace:
        """Release `streams` one at a time over `seconds`, from `now`."""
        return cls(now, seconds / max(1, streams))

    def step_done(self) -> float:
        """Count one release; return when the next step is due (maybe already past)."""
        self.steps += 1
        return self.start + self.steps * self.interval
