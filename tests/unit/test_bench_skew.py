"""The skewed workload (skew benchmark, load-balance test): the hot streams carry the wanted
share in every stretch of it, nothing is reordered."""

from __future__ import annotations

from benchmarks.skew import HOT, STREAMS, loads_cell
from framework.testing.traffic import skewed
from router.generator import generate_fragments
from router.hashing import stream_for_key


def test_the_hot_streams_carry_the_share_and_keep_every_fragment() -> None:
    fragments = list(generate_fragments(3_000, seed=5))
    pool = skewed(fragments, STREAMS, HOT, 0.7)
    hot = [f for f in pool if stream_for_key(f.key, STREAMS) in HOT]
    assert 0.65 <= len(hot) / len(pool) <= 0.75
    all_hot = [f for f in fragments if stream_for_key(f.key, STREAMS) in HOT]
    assert hot == all_hot, "a hot fragment was dropped or reordered"
    positions = {id(f): i for i, f in enumerate(fragments)}
    assert [positions[id(f)] for f in pool] == sorted(positions[id(f)] for f in pool)
    kept = {f.key for f in pool}
    in_pool = {id(f) for f in pool}
    assert all(id(f) in in_pool for f in fragments if f.key in kept), "a key lost fragments"
    assert {stream_for_key(k, STREAMS) for k in kept} > set(HOT), "no cold stream left"


def test_every_stretch_of_the_traffic_is_skewed() -> None:
    """Traffic sent at a steady rate is a prefix or a stretch: each must carry the share,
    else a test stopped early balances uniform traffic (generated keys appear in time order)."""
    pool = skewed(list(generate_fragments(20_000, seed=13)), STREAMS, HOT, 0.7)
    tenth = len(pool) // 10
    for start in range(0, 10 * tenth, tenth):
        stretch = pool[start : start + tenth]
        share = sum(stream_for_key(f.key, STREAMS) in HOT for f in stretch) / len(stretch)
        assert 0.6 <= share <= 0.8, (start, share)


def test_loads_cell() -> None:
    assert loads_cell({"node_loads": {"n1": 312.4, "n2": 1298.0}}) == "n1 312 / n2 1,298"
