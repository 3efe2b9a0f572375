"""Block mode (cache-spec R3, vLLM): any unlocked page is a victim; orphans stay charged
but unreachable until their parent comes back."""

from __future__ import annotations

from prefixsim.cache import POLICIES, CacheMode, RadixCache
from prefixsim.config import load_config
from prefixsim.simulate import simulate
from prefixsim.trace import Request


def fifo(mode: CacheMode) -> RadixCache:
    """P=1, capacity 4, FIFO: insert [1,2] then [3]; free 2 tokens (1 is free already)."""
    cache = RadixCache(4, POLICIES.build("fifo"), None, mode)
    cache.insert(None, [1, 2], [1, 1], 0.0, 0)
    cache.insert(None, [3], [1], 1.0, 1)
    cache.evict(2)
    cache.check_invariants()
    return cache


def test_block_mode_evicts_a_parent_and_orphans_its_child():
    """Radix: only leaves 2 and 3 are victims; FIFO takes 2, so [1,2] still matches 1 page.
    Block: page 1 (first in) goes although it has a child; 2 stays charged, unreachable."""
    radix = fifo(CacheMode.RADIX)
    assert {p.page_id for p in radix.pages()} == {1, 3}
    assert radix.match([1, 2], 2.0).num_pages == 1
    block = fifo(CacheMode.BLOCK)
    assert {p.page_id for p in block.pages()} == {2, 3}
    assert block.resident_tokens == 2
    assert block.orphan_tokens() == 1 and radix.orphan_tokens() == 0
    assert block.match([1, 2], 2.0).num_pages == 0


def test_block_mode_readopts_the_orphan_when_its_parent_returns():
    block = fifo(CacheMode.BLOCK)
    placed = block.insert(None, [1, 2], [1, 1], 2.0, 2)
    assert [p.page_id for p in placed] == [1, 2]
    assert block.counters.inserted_tokens == 4  # 1, 2, 3, then 1 again: 2 was reused
    assert block.orphan_tokens() == 0
    block.check_invariants()
    assert block.match([1, 2], 3.0).num_pages == 2


def test_block_mode_protects_the_whole_matched_path():
    """LRU block cache of 3 holding [1,2] (older) and [5]: a request matching [1,2] needs
    one token for page 4; the matched path is protected, so 5 goes, not 1 or 2."""
    cache = RadixCache(3, POLICIES.build("fifo"), None, CacheMode.BLOCK)
    cache.insert(None, [1, 2], [1, 1], 0.0, 0)
    cache.insert(None, [5], [1], 1.0, 1)
    match = cache.match([1, 2, 4], 2.0)
    cache.touch(match.pages, 2.0, 2)
    assert cache.evict(1, protect=match.last)
    assert {p.page_id for p in cache.pages()} == {1, 2}


def test_cli_mode_key_runs_every_policy():
    trace = [Request(i, float(i), 8, 1, (i % 3, 100 + 10 * (i % 3) + i % 5, 1000 + i), 3)
             for i in range(40)]
    for policy in POLICIES.names():
        config = load_config(overrides={"cache_only": True, "cache.mode": "block",
                                        "cache.capacity_tokens": 12, "cache.policy": policy})
        summary = simulate(config, trace).summary
        assert summary["completed"] == 40
