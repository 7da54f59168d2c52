"""The native records (sessionizer/native_records) against the Python reference.

- `session_id` returns exactly `reference_session_id`'s string for any stream, offset
  and key, and fails as it does on a key UTF-8 cannot encode.
- `SlottedBuilder` builds the instance the class's own `__init__` builds: equal, with
  the same hash, frozen, picklable, tracked by the collector; it refuses a wrong count
  of values, a value of a slot of another class, and anything but slot descriptors.

tests/unit/test_engine*.py run on the compiled path too (test_hot_path_compiled.py),
where the engine builds its records through these.
"""

from __future__ import annotations

import gc
import pickle
from dataclasses import FrozenInstanceError, dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.kernel.frozen import slot_descriptors
from framework.testing.hot_path_runs import load_native
from sessionizer.records import FinishedSession, reference_session_id
from state.record import IgnoreEntry

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@pytest.fixture(scope="module")
def native() -> Any:
    return load_native("_sessionizer_records")


def builder(native: Any, cls: type[Any]) -> Any:
    return native.SlottedBuilder(cls, slot_descriptors(cls))


@settings(max_examples=500, deadline=None)
@given(stream=st.text(), first_offset=INT64, key=st.text())
def test_session_id_is_the_reference(native: Any, stream: str, first_offset: int, key: str) -> None:
    try:
        expected: str | type[Exception] = reference_session_id(stream, first_offset, key)
    except UnicodeEncodeError:
        expected = UnicodeEncodeError
    if expected is UnicodeEncodeError:
        with pytest.raises(UnicodeEncodeError):
            native.session_id(stream, first_offset, key)
    else:
        assert native.session_id(stream, first_offset, key) == expected


def test_session_id_of_real_keys(native: Any) -> None:
    for key in ("66.249.73.135|Mozilla/5.0", "", "ключ", "\U0001f600" * 40, "k" * 10_000):
        assert native.session_id("sessions-07", 123_456, key) == reference_session_id(
            "sessions-07", 123_456, key
        )


def test_a_lone_surrogate_fails_as_in_the_reference(native: Any) -> None:
    with pytest.raises(UnicodeEncodeError):
        reference_session_id("s", 0, "\ud800")
    with pytest.raises(UnicodeEncodeError):
        native.session_id("s", 0, "\ud800")


SESSION_VALUES = st.tuples(
    st.text(), st.text(), st.text(), INT64, INT64, INT64, INT64, INT64,
    st.dictionaries(st.text(), st.integers()), st.booleans(),
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(values=SESSION_VALUES)
def test_a_built_session_is_the_dataclass(native: Any, values: tuple[Any, ...]) -> None:
    built = builder(native, FinishedSession)(*values)
    made = FinishedSession(*values)
    assert type(built) is FinishedSession
    assert built == made
    assert built.to_dict() == made.to_dict()
    assert pickle.loads(pickle.dumps(built)) == made
    assert gc.is_tracked(built)


@settings(max_examples=200, deadline=None)
@given(values=st.tuples(st.text(), INT64, INT64, INT64, INT64))
def test_a_built_ignore_entry_is_the_dataclass(native: Any, values: tuple[Any, ...]) -> None:
    built = builder(native, IgnoreEntry)(*values)
    assert built == IgnoreEntry(*values)
    assert hash(built) == hash(IgnoreEntry(*values))
    assert built.to_list() == IgnoreEntry(*values).to_list()


def test_a_built_record_stays_frozen(native: Any) -> None:
    built = builder(native, IgnoreEntry)("k", 1, 2, 3, 4)
    with pytest.raises(FrozenInstanceError):
        built.key = "other"  # type: ignore[misc]


def test_the_builder_refuses_a_wrong_count(native: Any) -> None:
    with pytest.raises(TypeError, match="IgnoreEntry takes 5 values, got 4"):
        builder(native, IgnoreEntry)("k", 1, 2, 3)


def test_the_builder_refuses_what_is_not_a_slot(native: Any) -> None:
    with pytest.raises(TypeError, match="not a slot's member descriptor"):
        native.SlottedBuilder(IgnoreEntry, (IgnoreEntry.covers,))


@dataclass(frozen=True, slots=True)
class _Other:
    key: str


def test_a_slot_of_another_class_is_refused_when_written(native: Any) -> None:
    # The member descriptor checks the instance's type, as `descriptor.__set__` does.
    mixed = native.SlottedBuilder(IgnoreEntry, (_Other.__dict__["key"],))
    with pytest.raises(TypeError):
        mixed("k")
