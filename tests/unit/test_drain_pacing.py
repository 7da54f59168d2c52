"""`--drain SECONDS` paces its releases from the drain's start: step k at start + k * interval,
so each step's own work (commit, handover, release) does not add up over the drain."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

import balancer.balancer as balancer_module
from balancer import Balancer, BalancerConfig, BalancerState, NoopListener
from balancer.drain import DrainPace

STEP_WORK_S = 0.18
"""What one release costs in the measured runs (commit, handover, release)."""


def test_the_pace_counts_every_step_from_the_start() -> None:
    pace = DrainPace.over(5.0, 20, now=100.0)
    assert pace.interval == 0.25
    assert [pace.step_done() for _ in range(3)] == [100.25, 100.5, 100.75]
    assert DrainPace.over(5.0, 0, now=0.0).interval == 5.0  # nothing held: one step


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


class FakeHoldings:
    """The balancer's holdings: `release_cheapest` costs `STEP_WORK_S` on the fake clock."""

    def __init__(self, clock: Clock, streams: int) -> None:
        self.clock = clock
        self.leases: dict[str, Any] = {f"app.stream.{i:04d}": object() for i in range(streams)}
        self.released: list[float] = []
        self.reporter = SimpleNamespace(due=lambda now: False)

    def leave(self) -> None:
        pass

    def release_cheapest(self) -> None:
        self.leases.pop(sorted(self.leases)[0])
        self.clock.now += STEP_WORK_S
        self.released.append(self.clock.now)


def _drain(
    monkeypatch: pytest.MonkeyPatch, seconds: float, streams: int
) -> tuple[float, list[float]]:
    """Drive a stable balancer's drain to its end; when it ended and when each release did."""
    clock = Clock()
    monkeypatch.setattr(balancer_module, "time", SimpleNamespace(monotonic=clock.monotonic))
    client = SimpleNamespace(connected=True)
    balancer = Balancer(BalancerConfig("zk:2181", "app", "n1"), NoopListener(), client=client)  # type: ignore[arg-type]
    held = FakeHoldings(clock, streams)
    balancer._held = held  # type: ignore[assignment]
    for state in (BalancerState.JOINING, BalancerState.BALANCING, BalancerState.STABLE):
        balancer._machine.to(state)
    start = clock.now
    balancer.drain(seconds)
    for _ in range(10 * streams + 10):
        if balancer.poll() is BalancerState.DRAINED:
            return clock.now - start, [at - start for at in held.released]
        if balancer._due is not None and balancer._due > clock.now:
            clock.now = balancer._due  # nothing due before then: skip ahead
    raise AssertionError(f"the drain never ended; {len(held.leases)} streams still held")


@pytest.mark.parametrize("streams", [1, 5, 22])
def test_a_drain_ends_within_its_period_plus_one_steps_work(
    monkeypatch: pytest.MonkeyPatch, streams: int
) -> None:
    took, released = _drain(monkeypatch, 5.0, streams)
    assert len(released) == streams
    assert took <= 5.0 + STEP_WORK_S + 1e-9, f"{streams} streams drained in {took:.2f} s"
    interval = 5.0 / streams
    for k, at in enumerate(released):  # release k starts at k * interval, then takes its work
        assert k * interval + STEP_WORK_S - 1e-9 <= at <= k * interval + STEP_WORK_S + 1e-9


def test_steps_that_fell_behind_run_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    took, released = _drain(monkeypatch, 1.0, 10)  # 0.1 s apart, each takes 0.18 s
    assert len(released) == 10
    assert took <= 10 * STEP_WORK_S + 1e-9, "a late step waited another interval"
