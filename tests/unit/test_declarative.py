"""`DeclarativeProcessor` (sessionizer.declarative): sessions as aggregates over fields.

Driven through `SessionEngine`, as a node runs them: each aggregate and condition, a
fragment an aggregate cannot fold (the whole session to the dead letters, the message
naming the aggregate; other sessions unharmed), definitions refused at class
definition, the handover identity, and a handover mid-session.  This module also runs
on the compiled path (tests/unit/test_hot_path_compiled.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from framework.kernel.watermark import Watermark
from framework.testkit import assert_exact, frag
from sessionizer import FinishedSession, Fragment, SessionEngine
from sessionizer.declarative import (
    DeclarativeProcessor,
    count,
    distinct,
    field,
    first,
    last,
    max_of,
    min_of,
    sum_of,
)
from sessionizer.errors import ProcessorError
from sessionizer.handover import export_engine, processor_identity, restore_engine
from sessionizer.records import FoldedHookFailure, HookFailure
from state.record import StreamState

STREAM = "sessionizer.stream.0000"
T0 = 1_700_000_000_000


class Orders(DeclarativeProcessor):
    """Every kind of aggregate, over a shop's order events."""

    timeout = 60
    grace = 0
    aggregates = {
        "events": count(),
        "paid": count(where=field("kind") == "paid"),
        "total": sum_of("amount", where=field("amount").present()),
        "cheapest": min_of("amount", where=field("amount").present()),
        "dearest": max_of("amount", where=field("amount").present()),
        "first_item": first("item"),
        "last_item": last("item"),
        "items": distinct("item"),
    }

    def finish(self, key: str, result: dict[str, Any]) -> Mapping[str, Any]:
        """Add the customer, from the key."""
        result["customer"] = key
        return result


def _run(processor: DeclarativeProcessor, fragments: list[tuple[str, int, dict[str, Any]]]) -> list:
    """Feed (key, seconds after T0, fields) in order, then end the input; return the outputs."""
    engine = SessionEngine(STREAM, processor)
    outputs: list[Any] = []
    for offset, (key, seconds, fields) in enumerate(fragments):
        outputs += engine.process(Fragment(offset, key, T0 + seconds * 1000, fields))
    outputs += engine.process(Watermark(T0 + 10**7, end=True, offset=len(fragments)))
    return outputs


def _results(outputs: list[Any]) -> dict[str, dict[str, Any]]:
    return {out.key: out.result for out in outputs if isinstance(out, FinishedSession)}


ORDER_EVENTS = [
    ("ann", 0, {"kind": "view", "item": "hat"}),
    ("ann", 5, {"kind": "paid", "item": "hat", "amount": 20}),
    ("bob", 6, {"kind": "view", "item": None}),
    ("ann", 9, {"kind": "paid", "item": "scarf", "amount": 7.5}),
    ("ann", 12, {"kind": "view", "item": None}),
    ("ann", 14, {"kind": "paid", "item": "hat", "amount": 30}),
]


def test_each_aggregate_over_a_session_in_the_order_written_then_finish() -> None:
    results = _results(_run(Orders(), ORDER_EVENTS))
    assert list(results["ann"].items()) == [
        ("events", 5),
        ("paid", 3),
        ("total", 57.5),
        ("cheapest", 7.5),
        ("dearest", 30),
        ("first_item", "hat"),
        ("last_item", "hat"),  # the last that is not None
        ("items", 3),  # hat, scarf and None
        ("customer", "ann"),
    ]
    assert results["bob"] == {
        "events": 1,
        "paid": 0,
        "total": 0,
        "cheapest": None,
        "dearest": None,
        "first_item": None,
        "last_item": None,
        "items": 1,
        "customer": "bob",
    }


def test_aggregates_fold_in_event_time_order_not_arrival_order() -> None:
    class Late(DeclarativeProcessor):
        timeout = 60
        grace = 30
        aggregates = {"first": first("n"), "last": last("n")}

    fragments = [("k", 10, {"n": "b"}), ("k", 5, {"n": "a"}), ("k", 20, {"n": "c"})]
    assert _results(_run(Late(), fragments))["k"] == {"first": "a", "last": "c"}


class Conditions(DeclarativeProcessor):
    """One count per kind of condition."""

    timeout = 60
    grace = 0
    aggregates = {
        "eq": count(where=field("n") == 2),
        "ne": count(where=field("n") != 2),
        "lt": count(where=field("n") < 2),
        "le": count(where=field("n") <= 2),
        "gt": count(where=field("n") > 2),
        "ge": count(where=field("n") >= 2),
        "in": count(where=field("n").is_in([1, 3])),
        "and": count(where=(field("n") > 1) & (field("n") < 3)),
        "or": count(where=(field("n") < 2) | (field("n") > 2)),
        "not": count(where=~(field("n") == 2)),
        "tagged": count(where=field("tag").present()),
        "guarded": count(where=field("tag").present() & (field("tag") == "x")),
        "page": count(where=~field("p").ends_with([".CSS", ".js"], ignore_case=True, cut_at="?")),
    }


def test_every_condition_counts_the_fragments_it_holds_for() -> None:
    fragments = [
        ("k", 0, {"n": 1, "p": "/a.css?v=1"}),
        ("k", 1, {"n": 2, "p": "/b.html?x=.css", "tag": "x"}),
        ("k", 2, {"n": 3, "p": "/C.JS"}),
    ]
    assert _results(_run(Conditions(), fragments))["k"] == {
        "eq": 1,
        "ne": 2,
        "lt": 1,
        "le": 2,
        "gt": 1,
        "ge": 2,
        "in": 2,
        "and": 1,
        "or": 2,
        "not": 2,
        "tagged": 1,
        "guarded": 1,  # `present()` first: fragments without the field do not fail
        "page": 1,  # only the part before "?" counts, in any case
    }


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (
            {"kind": "paid", "item": "hat", "amount": "20"},
            "AggregateError: aggregate 'total' (sum_of('amount', where=field('amount')"
            ".present())): sum_of takes numbers, got a str",
        ),
        (
            {"item": "hat"},
            "AggregateError: aggregate 'paid' (count(where=field('kind') == 'paid'))",
        ),
        (
            {"kind": "paid", "item": ["a", "list"]},
            "AggregateError: aggregate 'items' (distinct('item')): TypeError: unhashable type",
        ),
        (
            {"kind": "paid", "item": "hat", "amount": None},
            "AggregateError: aggregate 'total' (sum_of('amount', where=field('amount')"
            ".present())): sum_of takes numbers, got a NoneType",
        ),
    ],
)
def test_a_fragment_an_aggregate_cannot_fold_sends_its_session_to_the_dead_letters(
    bad: dict[str, Any], error: str
) -> None:
    fragments = [*ORDER_EVENTS[:2], ("ann", 5, bad), *ORDER_EVENTS[2:]]
    outputs = _run(Orders(), fragments)
    letters = [out for out in outputs if isinstance(out, HookFailure | FoldedHookFailure)]
    # All or nothing: every fragment of ann's session, with the aggregate named.
    assert sorted(letter.offset for letter in letters) == [0, 1, 2, 4, 5, 6]
    assert {letter.hook for letter in letters} == {"update"}
    assert all(letter.error.startswith(error) for letter in letters), letters[0].error
    assert all(letter.session_id for letter in letters)
    assert set(_results(outputs)) == {"bob"}  # the other session is unharmed


def test_a_missing_field_is_named() -> None:
    outputs = _run(Orders(), [("ann", 0, {"kind": "view"})])
    (letter,) = [out for out in outputs if isinstance(out, HookFailure | FoldedHookFailure)]
    assert letter.error == (
        "AggregateError: aggregate 'first_item' (first('item')): the fragment has no field 'item'"
    )
    assert letter.traceback.strip().endswith(letter.error)


def test_values_that_do_not_compare_fail_min_of() -> None:
    class Least(DeclarativeProcessor):
        timeout = 60
        aggregates = {"least": min_of("v")}

    outputs = _run(Least(), [("k", 0, {"v": 3}), ("k", 1, {"v": "x"})])
    (_, letter) = [out for out in outputs if isinstance(out, HookFailure | FoldedHookFailure)]
    assert letter.error.startswith("AggregateError: aggregate 'least' (min_of('v')): TypeError: ")


@pytest.mark.parametrize(
    ("aggregates", "message"),
    [
        ({}, "Bad.aggregates must be a non-empty dict"),
        ({"n": len}, "Bad.aggregates['n'] is <built-in function len>, not an aggregate"),
        ({"": count()}, "result names are non-empty strings"),
    ],
)
def test_a_bad_definition_fails_at_class_definition(
    aggregates: dict[str, Any], message: str
) -> None:
    with pytest.raises(ProcessorError) as raised:
        type("Bad", (DeclarativeProcessor,), {"aggregates": aggregates})
    assert message in str(raised.value)


@pytest.mark.parametrize(
    "make",
    [
        lambda: sum_of(""),
        lambda: first(3),
        lambda: count(where="status >= 400"),
        lambda: field("p").ends_with([]),
        lambda: field("p").ends_with([".css", ""]),
        lambda: field("p").ends_with([".css"], cut_at=""),
        lambda: field("p").is_in([[1]]),
    ],
)
def test_a_bad_aggregate_or_condition_is_refused_where_it_is_written(make: Any) -> None:
    with pytest.raises(ProcessorError):
        make()


def test_the_handover_identity_changes_with_the_aggregates_unless_a_version_is_set() -> None:
    def processor(aggregates: dict[str, Any], **attributes: Any) -> DeclarativeProcessor:
        cls = type("P", (DeclarativeProcessor,), {"aggregates": aggregates, **attributes})
        return cls()  # type: ignore[no-any-return]

    same = (
        processor_identity(processor({"n": count()})),
        processor_identity(processor({"n": count()})),
    )
    assert same[0] == same[1]
    assert processor_identity(processor({"n": count(where=field("a") > 1)})) != same[0]
    assert processor_identity(processor({"m": count()})) != same[0]
    assert processor_identity(processor({"n": count()}, version=3)).endswith("@3")


def test_a_session_handed_over_midway_finishes_as_if_never_moved() -> None:
    cut = 3
    engine = SessionEngine(STREAM, Orders())
    for offset, (key, seconds, fields) in enumerate(ORDER_EVENTS[:cut]):
        assert not engine.process(Fragment(offset, key, T0 + seconds * 1000, fields))
    state = StreamState.decode(engine.snapshot(cut).encode(), stream=STREAM)
    restored = restore_engine(Orders(), state, export_engine(engine))
    outputs: list[Any] = []
    for offset, (key, seconds, fields) in enumerate(ORDER_EVENTS[cut:], start=cut):
        outputs += restored.process(Fragment(offset, key, T0 + seconds * 1000, fields))
    outputs += restored.process(Watermark(T0 + 10**7, end=True, offset=len(ORDER_EVENTS)))
    assert _results(outputs) == _results(_run(Orders(), ORDER_EVENTS))


def test_a_declared_processor_is_exact_through_crashes_at_every_offset() -> None:
    class PageViews(DeclarativeProcessor):
        timeout = 30 * 60
        grace = 2 * 60
        aggregates = {
            "pages": count(),
            "bytes": sum_of("bytes"),
            "landing": first("path", where=field("status") < 400),
        }

    visit = [
        frag("ann", "2024-01-01T10:00Z", path="/a", status=404, bytes=10),
        frag("ann", "2024-01-01T10:03Z", path="/b", status=200, bytes=5),
        frag("bob", "2024-01-01T10:04Z", path="/c", status=200, bytes=1),
        frag("ann", "2024-01-01T11:00Z", path="/d", status=200, bytes=7),
    ]
    results = [session.result for session in assert_exact(PageViews(), visit).sessions]
    assert sorted(results, key=lambda result: result["landing"]) == [
        {"pages": 2, "bytes": 15, "landing": "/b"},
        {"pages": 1, "bytes": 1, "landing": "/c"},
        {"pages": 1, "bytes": 7, "landing": "/d"},
    ]
