"""No test times anything: Hypothesis's own clocks are off for every property test."""

from __future__ import annotations

from hypothesis import HealthCheck, settings


def test_property_tests_have_no_deadline_and_no_too_slow_check() -> None:
    assert settings.default.deadline is None
    assert HealthCheck.too_slow in settings.default.suppress_health_check
