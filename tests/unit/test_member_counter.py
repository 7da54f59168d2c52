"""The test member's own "decode" of a stream's state: what it resumes, what it quarantines."""

from __future__ import annotations

import pytest

from balancer.claims import encode
from framework.testing.member import decode_counter
from state.errors import CorruptStateError
from state.record import StreamState

STREAM = "shop.stream.0001"


def test_empty_counter_json_and_a_reset_record_are_counters() -> None:
    assert decode_counter(b"", STREAM) == 0
    assert decode_counter(encode({"counter": 41, "node": "m1"}), STREAM) == 41
    reset = StreamState(STREAM, epoch=3, safe_offset=17, committed_offset=17)
    assert decode_counter(reset.encode(), STREAM) == 17


@pytest.mark.parametrize(
    "data",
    [
        b"\x07\xde\xad\xbe\xef garbage",
        b'{"counter": "many"}',
        b'{"counter": -1}',
        b"[1, 2]",
        StreamState("another.stream.0002").encode(),
    ],
)
def test_anything_else_is_corrupt(data: bytes) -> None:
    with pytest.raises(CorruptStateError) as raised:
        decode_counter(data, STREAM)
    assert raised.value.stream == STREAM and raised.value.problem
