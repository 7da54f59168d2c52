"""The demo's and tests' verification: lost, extra and conflicting duplicates are all caught."""

from __future__ import annotations

from framework.verify import differences, expected_sessions, verify_sessions
from router.fragment import ParsedFragment
from sessionizer.examples.weblog import WebSessions

MINUTE = 60_000
FIELDS = {"ip": "1", "site": "-", "path": "/", "status": 200, "bytes": 1, "method": "GET",
          "protocol": "HTTP/1.1", "referrer": "-", "agent": "x"}  # fmt: skip


def _fragments() -> list[ParsedFragment]:
    # Key a: two visits (a 40-minute gap splits them); key b: one visit.
    return [ParsedFragment(k, m * MINUTE, FIELDS) for k, m in [("a", 0), ("b", 1), ("a", 5),
                                                               ("a", 45)]]  # fmt: skip


def _session(ident: str, key: str, first: int, last: int, count: int) -> dict:
    return {"session_id": ident, "key": key, "first_ts": first * MINUTE,
            "last_ts": last * MINUTE, "fragments": count}  # fmt: skip


def test_exact_output_with_identical_duplicates_verifies() -> None:
    expected = expected_sessions(_fragments(), WebSessions())
    written = [_session("1", "a", 0, 5, 2), _session("2", "b", 1, 1, 1),
               _session("3", "a", 45, 45, 1), _session("1", "a", 0, 5, 2)]  # fmt: skip
    result = verify_sessions(written, expected, fragments_sent=4)
    assert result.exact and result.duplicates == 1 and result.expected == 3
    assert result.line() == (
        "verified: fragments sent 4, sessions found 3, expected 3, lost 0, duplicates 1"
    )


def test_lost_extra_and_conflicting_duplicates_are_reported() -> None:
    expected = expected_sessions(_fragments(), WebSessions())
    written = [_session("1", "a", 0, 45, 3), _session("2", "b", 1, 1, 1),
               _session("2", "b", 1, 2, 1)]  # fmt: skip
    result = verify_sessions(written, expected, fragments_sent=4)
    assert (result.lost, result.extra, result.conflicting_duplicates) == (2, 1, 1)
    assert not result.exact


def test_differences_name_the_lost_and_the_extra_sessions_with_their_ids() -> None:
    expected = expected_sessions(_fragments(), WebSessions())
    written = [_session("s1", "a", 0, 45, 3), _session("s2", "b", 1, 1, 1)]
    assert differences(written, expected) == [
        f"lost ('a', 0, {5 * MINUTE}, 2)",
        f"lost ('a', {45 * MINUTE}, {45 * MINUTE}, 1)",
        f"extra ('a', 0, {45 * MINUTE}, 3) ['s1']",
    ]
    assert differences(written, expected, limit=1) == [
        f"lost ('a', 0, {5 * MINUTE}, 2)",
        f"extra ('a', 0, {45 * MINUTE}, 3) ['s1']",
    ]
