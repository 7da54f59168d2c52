"""SafeOffsetTracker: Figure 4.3, the exact ignore test, pruning, parked records, the size bound."""

from __future__ import annotations

import msgpack
from hypothesis import given
from hypothesis import strategies as st

from framework.kernel.limits import MAX_KEY_BYTES
from framework.testing.engine_cases import FIGURE_4_3
from state import IgnoreEntry, SafeOffsetTracker
from state.tracker import ENTRY_OVERHEAD_BYTES, IGNORE_LIST_BUDGET_BYTES, entry_bytes

_BEFORE: dict[int, int | None] = {}
"""Stream time before each open session's first record, as its session in an engine
keeps it (the tracker asks for it: `OpenedBefore`)."""


def _open(tracker: SafeOffsetTracker, key: str, offset: int, before: int | None) -> None:
    _BEFORE[offset] = before
    tracker.session_opened(key, offset)


def _before(offset: int, key: str) -> int | None:
    return _BEFORE[offset]


def _drive_figure() -> dict[int, tuple[int, set[str]]]:
    """Feed Figure 4.3 to a tracker; return (safe offset, ignored sessions) after each offset."""
    tracker = SafeOffsetTracker()
    first: dict[str, int] = {}
    after: dict[int, tuple[int, set[str]]] = {}
    for offset, session, mark in FIGURE_4_3:
        if mark == "+":
            first[session] = offset
            _open(tracker, session, offset, offset - 1)
        elif mark == "*":
            start = first[session]
            entry = IgnoreEntry(session, start, offset, offset, offset)
            tracker.session_finished(start, entry)
        tracker.advance(offset + 1, stream_time_ms=offset)
        after[offset] = (tracker.safe_offset, {e.key for e in tracker.ignore_list()})
    return after


def test_figure_4_3_safe_offset_and_ignore_list() -> None:
    after = _drive_figure()
    # "after fragment 3 ... s1 will be finished ... start at fragment 1 ... ignore s1"
    assert after[3] == (1, {"s1"})
    # "When s3 finishes after fragment 7, the safe offset cannot be moved forward"
    assert after[7] == (1, {"s1", "s3"})
    # "When s2 finally finishes after fragment 8 ... moved ahead to ... s4 ... 6,
    #  and s1 can be dropped from the sessions to be ignored"
    assert after[8] == (6, {"s3", "s2"})


def test_safe_offset_is_next_offset_when_nothing_is_open() -> None:
    tracker = SafeOffsetTracker(next_offset=5, stream_time_ms=40)
    assert tracker.safe_offset == 5
    tracker.advance(9, stream_time_ms=70)
    assert (tracker.safe_offset, tracker.stream_time_at_safe_offset(_before)) == (9, 70)


def test_stream_time_is_the_one_just_before_the_safe_offset() -> None:
    tracker = SafeOffsetTracker()
    _open(tracker, "a", 3, 100)
    _open(tracker, "b", 7, 180)
    tracker.advance(10, stream_time_ms=250)
    assert (tracker.safe_offset, tracker.stream_time_at_safe_offset(_before)) == (3, 100)
    tracker.session_dropped(3)  # merged away: its fragments now live in another session
    assert (tracker.safe_offset, tracker.stream_time_at_safe_offset(_before)) == (7, 180)


def test_skip_needs_key_span_and_offset() -> None:
    tracker = SafeOffsetTracker(ignore=[IgnoreEntry("k", 10, 20, 7, 7)])
    assert tracker.should_skip("k", 5, 15)
    assert tracker.should_skip("k", 7, 10)
    assert not tracker.should_skip("k", 8, 15)  # read after the session's last fragment
    assert not tracker.should_skip("k", 5, 21)  # outside the event-time span
    assert not tracker.should_skip("k", 5, 9)
    assert not tracker.should_skip("other", 5, 15)


def test_a_new_session_starting_at_the_end_fragments_millisecond_is_not_skipped() -> None:
    # The session's END is at offset 5, ts 20; a fragment read later (offset 7) with an
    # earlier event time also belonged to it.  Offset 6 at ts 20 sorts after the END.
    entry = IgnoreEntry("k", 10, 20, last_offset=7, tail_offset=5)
    tracker = SafeOffsetTracker(ignore=[entry])
    assert tracker.should_skip("k", 7, 12)
    assert tracker.should_skip("k", 4, 20)
    assert not tracker.should_skip("k", 6, 20)


def test_ignore_list_drops_sessions_wholly_before_the_safe_offset() -> None:
    tracker = SafeOffsetTracker()
    _open(tracker, "open", 4, 0)
    _open(tracker, "done", 1, 0)
    tracker.session_finished(1, IgnoreEntry("done", 0, 5, 3, 3))
    _open(tracker, "later", 5, 0)
    tracker.session_finished(5, IgnoreEntry("later", 6, 9, 6, 6))
    tracker.advance(7, stream_time_ms=9)
    assert [e.key for e in tracker.ignore_list()] == ["later"]
    assert not tracker.should_skip("done", 2, 4)


def test_a_parked_record_holds_the_safe_offset_like_an_open_session() -> None:
    tracker = SafeOffsetTracker(next_offset=3, stream_time_ms=40)
    tracker.hold(3, stream_time_before=40)
    tracker.advance(6, stream_time_ms=40)
    assert (tracker.safe_offset, tracker.stream_time_at_safe_offset(_before)) == (3, 40)
    assert tracker.open_sessions == 0 and tracker.oldest_open() is None
    _open(tracker, "a", 5, 40)
    assert tracker.oldest_open() is None  # the parked record is older
    tracker.release(3)
    assert (tracker.safe_offset, tracker.oldest_open()) == (5, (5, "a"))
    tracker.session_dropped(5)
    assert (tracker.safe_offset, tracker.oldest_open()) == (6, None)


def test_a_hold_released_past_a_bound_keeps_the_safe_offset_out_of_the_span() -> None:
    """A resize target's forward at 2 and its dropped repeat at 7: no replay may start in
    (2, 7], where it would meet the repeat without the forward."""
    tracker = SafeOffsetTracker()
    tracker.hold(2, stream_time_before=10)
    _open(tracker, "a", 4, 12)
    _open(tracker, "b", 9, 15)
    tracker.advance(11, stream_time_ms=20)
    tracker.release_past(2, 7)
    assert tracker.safe_offset == 2  # "a" at 4 would start a replay before the repeat
    tracker.session_dropped(4)
    assert (tracker.safe_offset, tracker.stream_time_at_safe_offset(_before)) == (9, 15)
    _open(tracker, "c", 12, 20)
    tracker.session_dropped(9)
    assert tracker.safe_offset == 12  # let go for good: later holders are past the bound


def test_a_bounded_hold_goes_with_the_next_offset_and_survives_a_handover() -> None:
    tracker = SafeOffsetTracker()
    tracker.hold(2, stream_time_before=10)
    _open(tracker, "a", 4, 12)
    tracker.advance(8, stream_time_ms=20)
    tracker.release_past(2, 7)
    restored = SafeOffsetTracker.restore_state(tracker.export_state(_before))
    assert restored.export_state(_before) == tracker.export_state(_before)
    for each in (tracker, restored):
        each.session_dropped(4)
        assert each.safe_offset == 8
    tracker.release_past(99, 100)  # not held: nothing to keep
    assert tracker.safe_offset == 8
    plain = SafeOffsetTracker()
    assert len(plain.export_state(_before)) == 9  # no bounded hold: the export as it was


def test_a_record_held_twice_is_held_until_both_let_go() -> None:
    """A resize target's forward at 3, parked by the engine too: each holder releases once."""
    tracker = SafeOffsetTracker()
    tracker.hold(3, stream_time_before=10)
    tracker.hold(3, stream_time_before=10)
    tracker.advance(6, stream_time_ms=30)
    assert len(tracker.export_state(_before)) == 11  # refuses a handover, as a resize must
    restored = SafeOffsetTracker.restore_state(tracker.export_state(_before))
    for each in (tracker, restored):
        each.release(3)  # the engine's verdict on the parked record
        assert (each.safe_offset, each.stream_time_at_safe_offset(_before)) == (3, 10)
        each.release(3)  # the forward's seal
        assert each.safe_offset == 6
    tracker.hold(3, stream_time_before=10)
    tracker.hold(3, stream_time_before=10)
    tracker.release_past(3, 5)  # the seal, with a repeat at 5: let go once the park is done
    assert tracker.safe_offset == 3
    tracker.release(3)
    assert tracker.safe_offset == 6


def test_ignore_bytes_counts_exactly_the_entries_at_or_after_the_safe_offset() -> None:
    tracker = SafeOffsetTracker()
    _open(tracker, "long", 0, None)
    _open(tracker, "x", 2, None)
    for offset, key in [(1, "s1"), (3, "s22"), (4, "s333")]:
        _open(tracker, key, offset, None)
        tracker.session_finished(offset, IgnoreEntry(key, offset, offset, offset, offset))
    tracker.advance(5, stream_time_ms=4)
    assert tracker.ignore_bytes() == 2 + 3 + 4 + 3 * ENTRY_OVERHEAD_BYTES
    tracker.ignore_list()  # pruning (as at a commit) changes nothing
    assert tracker.ignore_bytes() == 2 + 3 + 4 + 3 * ENTRY_OVERHEAD_BYTES
    tracker.session_finished(0, IgnoreEntry("long", 0, 0, 0, 0))  # "x" holds it now, at 2
    assert tracker.ignore_bytes() == 3 + 4 + 2 * ENTRY_OVERHEAD_BYTES


def test_the_resumed_ignore_list_counts_too() -> None:
    entries = [IgnoreEntry("ключ", 10, 20, 7, 7), IgnoreEntry("k", 10, 20, 9, 9)]
    tracker = SafeOffsetTracker(next_offset=5, ignore=entries)
    assert tracker.ignore_bytes() == sum(entry_bytes(e) for e in entries)
    assert entry_bytes(entries[0]) == len("ключ".encode()) + ENTRY_OVERHEAD_BYTES


@given(
    st.text(max_size=MAX_KEY_BYTES // 4),
    st.lists(st.integers(-(2**63), 2**64 - 1), min_size=4, max_size=4),
)
def test_entry_bytes_bounds_the_encoded_entry(key: str, numbers: list[int]) -> None:
    entry = IgnoreEntry(key, *numbers)
    assert len(msgpack.packb(entry.to_list(), use_bin_type=True)) <= entry_bytes(entry)


@given(
    st.lists(
        st.tuples(st.booleans(), st.sampled_from(["a", "bb", "ccc", "ключ"]), st.integers(0, 9)),
        max_size=60,
    ),
    st.integers(0, 4 * ENTRY_OVERHEAD_BYTES),
)
def test_over_budget_answers_as_ignore_bytes_does(
    steps: list[tuple[bool, str, int]], budget: int
) -> None:
    """Two trackers fed alike, one asked `ignore_bytes() > budget` after every record and
    the other `over_budget(budget)`: the same answer at every record, whether or not the
    unpruned sum let `over_budget` skip the safe offset."""
    asked, quick = SafeOffsetTracker(), SafeOffsetTracker()
    open_at: list[int] = []
    for offset, (opens, key, pick) in enumerate(steps):
        for tracker in (asked, quick):
            if opens or not open_at:
                _open(tracker, f"{key}{offset}", offset, None)
            else:
                first = open_at[pick % len(open_at)]
                entry = IgnoreEntry(f"{key}{first}", first, offset, first, offset)
                tracker.session_finished(first, entry)
            tracker.advance(offset + 1, stream_time_ms=offset)
        if opens or not open_at:
            open_at.append(offset)
        else:
            open_at.remove(open_at[pick % len(open_at)])
        assert quick.over_budget(budget) == (asked.ignore_bytes() > budget)
    assert quick.safe_offset == asked.safe_offset
    assert quick.ignore_list() == asked.ignore_list()


def test_over_budget_still_lets_a_bounded_hold_go_at_the_same_record() -> None:
    """With a bounded hold waiting, `over_budget` finds the safe offset after every record
    even far under budget: the hold goes at the record it went at before (a replay's)."""
    trackers = [SafeOffsetTracker(), SafeOffsetTracker()]
    for tracker in trackers:
        tracker.hold(2, stream_time_before=10)
        _open(tracker, "a", 4, 12)
        _open(tracker, "b", 9, 15)
        tracker.advance(11, stream_time_ms=20)
        tracker.release_past(2, 7)
        tracker.session_dropped(4)
    asked, quick = trackers
    assert asked.ignore_bytes() == 0
    assert not quick.over_budget(IGNORE_LIST_BUDGET_BYTES)
    for tracker in trackers:  # let go already: a later holder before the bound cannot hold it
        _open(tracker, "c", 5, 20)
        assert tracker.safe_offset == 5


def test_finished_entries_under_budget_do_not_pile_up() -> None:
    """Asked only `over_budget` (far under budget), the tracker still drops the entries of
    sessions wholly before the safe offset, on the finished sessions' prune schedule: what
    it holds (and a handover carries) stays bounded by the live entries, not by the budget."""
    tracker = SafeOffsetTracker()
    for offset in range(5000):
        _open(tracker, f"visitor-{offset}", offset, None)
        tracker.session_finished(offset, IgnoreEntry(f"visitor-{offset}", 0, 0, offset, offset))
        tracker.advance(offset + 1, stream_time_ms=offset)
        assert not tracker.over_budget(IGNORE_LIST_BUDGET_BYTES)
    heap = tracker.export_state(_before)[4]
    assert len(heap) <= 2 * 1024  # the prune schedule's slack: none of them is live
    assert tracker.ignore_bytes() == 0
