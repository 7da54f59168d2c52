"""Synthetic traffic: deterministic per seed, apache-shaped, sorted, exactly N sessions."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from router import ParsedFragment
from router.formats import parse_line
from router.formats_apache import referrer_site
from router.generator import (
    DEFAULT_START_MS,
    MAX_PAGE_GAP_MS,
    MIN_RETURN_GAP_MS,
    generate_fragments,
)

TIMEOUT_MS = 30 * 60 * 1000
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def batch_sessions(fragments: Iterable[ParsedFragment], gap_ms: int) -> list[list[int]]:
    """The batch definition: per key, split the sorted times where neighbours are > gap apart."""
    times: dict[str, list[int]] = defaultdict(list)
    for fragment in fragments:
        times[fragment.key].append(fragment.timestamp_ms)
    sessions = []
    for stamps in times.values():
        stamps.sort()
        current = [stamps[0]]
        for previous, stamp in pairwise(stamps):
            if stamp - previous > gap_ms:
                sessions.append(current)
                current = []
            current.append(stamp)
        sessions.append(current)
    return sessions


def as_apache_line(fragment: ParsedFragment) -> str:
    """Render a generated fragment as the Apache log line it stands for."""
    f = fragment.fields
    moment = datetime.fromtimestamp(fragment.timestamp_ms / 1000, tz=UTC)
    when = f"{moment:%d}/{MONTHS[moment.month - 1]}/{moment:%Y:%H:%M:%S} +0000"
    size = "-" if f["bytes"] == 0 else f["bytes"]
    return (
        f'{f["ip"]} - - [{when}] "{f["method"]} {f["path"]} {f["protocol"]}" {f["status"]} '
        f'{size} "{f["referrer"]}" "{f["agent"]}"'
    )


def test_same_seed_same_fragments_other_seed_other_fragments() -> None:
    first = list(generate_fragments(300, seed=11))
    assert first == list(generate_fragments(300, seed=11))
    assert first != list(generate_fragments(300, seed=12))


def test_round_trips_through_the_apache_parser() -> None:
    """Same shape as apache: each fragment is what parsing its own log line gives."""
    for fragment in generate_fragments(200, seed=3):
        assert parse_line("apache", as_apache_line(fragment)) == fragment


def test_fields_are_consistent_with_the_key() -> None:
    for fragment in generate_fragments(200, seed=4):
        f = fragment.fields
        assert fragment.key == f"{f['ip']}|{f['agent']}"
        assert f["site"] == referrer_site(f["referrer"])
        assert fragment.timestamp_ms % 1000 == 0  # whole seconds, like an Apache log


def test_sorted_by_event_time_and_starts_at_start_ms() -> None:
    times = [f.timestamp_ms for f in generate_fragments(500, seed=5)]
    assert times == sorted(times)
    assert times[0] == DEFAULT_START_MS
    later = next(iter(generate_fragments(5, seed=5, start_ms=1_000)))
    assert later.timestamp_ms == 1_000


@settings(max_examples=30, deadline=None)
@given(sessions=st.integers(0, 150), seed=st.integers(0, 2**32))
def test_batch_definition_finds_exactly_the_requested_sessions(sessions: int, seed: int) -> None:
    fragments = list(generate_fragments(sessions, seed))
    assert len(batch_sessions(fragments, TIMEOUT_MS)) == sessions
    # The gaps stay far from the 30-minute boundary, so a 2-minute grace cannot blur it.
    assert len(batch_sessions(fragments, MAX_PAGE_GAP_MS)) == sessions
    assert len(batch_sessions(fragments, MIN_RETURN_GAP_MS - 1)) == sessions


def test_variety() -> None:
    fragments = list(generate_fragments(2_000, seed=1))
    sessions = batch_sessions(fragments, TIMEOUT_MS)
    pages = [len(session) for session in sessions]
    assert 0.25 < pages.count(1) / len(sessions) < 0.45  # bounces
    assert max(pages) >= 8
    keys = {f.key for f in fragments}
    assert 1_400 < len(keys) < 1_900  # some visitors come back with the same key
    hosts = {f.fields["referrer"].split("/")[2] for f in fragments if f.fields["referrer"] != "-"}
    assert {"shop.example.com", "blog.example.org", "docs.example.net"} < hosts
    assert {f.fields["status"] for f in fragments} == {200, 304, 404}
    assert {f.fields["method"] for f in fragments} == {"GET", "POST"}
    span = fragments[-1].timestamp_ms - fragments[0].timestamp_ms
    assert timedelta(milliseconds=span) > timedelta(hours=2)


def test_zero_sessions_is_empty() -> None:
    assert list(generate_fragments(0, seed=1)) == []


@pytest.mark.parametrize(("sessions", "start_ms"), [(-1, 0), (1, -5)])
def test_invalid_arguments_fail_at_call_time(sessions: int, start_ms: int) -> None:
    with pytest.raises(ValueError, match="must be >= 0"):
        generate_fragments(sessions, seed=1, start_ms=start_ms)
