"""The key -> stream contract: BLAKE2b-64 of the key, then Lamping & Veach's jump hash.

This is a cross-language contract (see docs/routing.md): every producer, in any
language, must send a key to the same stream.  Python's `hash()` is salted per
process and must never be used here.
"""

from __future__ import annotations

import hashlib

from framework.kernel.errors import InvalidArgument

__all__ = ["hash64", "jump_consistent_hash", "stream_for_key"]

_MASK64 = (1 << 64) - 1
# The 64-bit LCG multiplier of the published algorithm (Lamping & Veach 2014, fig. 1).
_LCG_MULTIPLIER = 2862933555777941757
_TWO_POW_31 = float(1 << 31)


def hash64(key: str) -> int:
    """Return BLAKE2b (8-byte digest) of the key's UTF-8 bytes as an unsigned little-endian int."""
    # No Unicode normalization: "é" (U+00E9) and "e" + U+0301 are different keys.
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=False)


def jump_consistent_hash(key: int, num_buckets: int) -> int:
    """Return the bucket in [0, num_buckets) for a 64-bit key (Lamping & Veach's jump hash)."""
    if not 0 <= key <= _MASK64:
        raise InvalidArgument(f"jump hash key must be an unsigned 64-bit integer, got {key}")
    if num_buckets < 1:
        raise InvalidArgument(f"the number of buckets must be at least 1, got {num_buckets}")
    b, j = -1, 0
    while j < num_buckets:
        b = j
        # C++ wraps uint64 arithmetic silently; Python ints do not, so mask explicitly.
        key = (key * _LCG_MULTIPLIER + 1) & _MASK64
        # Same double-precision expression as the C++ code, so results match bit for bit.
        j = int((b + 1) * (_TWO_POW_31 / float((key >> 33) + 1)))
    return b


def stream_for_key(key: str, num_streams: int) -> int:
    """Return the index of the stream a session key is routed to."""
    return jump_consistent_hash(hash64(key), num_streams)
