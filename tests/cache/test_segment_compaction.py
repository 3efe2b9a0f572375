"""Compaction of the compressed cache's queues (cache/segment_tree.py `_compact`) where the
contract tests of leaf mode do not reach: block mode, where every unlocked segment is a
victim and the victim queue keeps its entries by `_live_any` or, an entry per page,
`_live_page` (the deadline run's own `keep` and `check`: tests/cache/test_deadline_run.py).
Known answers worked by hand: compaction drops stale entries only, so what leaves next is
what would have left without it.
"""

from __future__ import annotations

import pytest

from prefixsim.cache import POLICIES, CacheMode, TTLRule
from prefixsim.cache.segment_tree import SegmentCache

P = 4  # tokens per page


def block_cache(capacity: int, ttl: float | None = None, policy: str = "lru") -> SegmentCache:
    return SegmentCache(capacity, POLICIES.build(policy), None if ttl is None else TTLRule(ttl),
                        mode=CacheMode.BLOCK)


def pages(cache: SegmentCache) -> list[int]:
    return sorted(cache.page_ids())


def hammer(cache: SegmentCache, page: int, times: int, first_recency: int) -> None:
    """Hit one page `times` times (t < times / 100): each hit queues its segment again,
    leaving its earlier entries stale."""
    for step in range(times):
        cache.access([page], step / 100, first_recency + step, P, P)


@pytest.mark.parametrize("policy", ["lru", "fifo", "gdsf", "s3fifo"])
def test_block_mode_compaction_keeps_an_untouched_victim(policy):
    """Block mode, capacity 2 pages, no TTL: [1] then [2] at t=0; page 2 is hit 5,000
    times, so the victim queue holds thousands of stale entries of [2] and compacts (it
    looks every 1,024 queue operations, and compacts past 4 x segments + 2,048 entries). The
    one entry of [1] is live and must survive: freeing a page's tokens then takes page 1
    (least recently used; first inserted for FIFO; least valued for GDSF; unhit in S3-FIFO's
    small queue). GDSF and S3-FIFO keep an entry per page (`_live_page` keeps them)."""
    cache = block_cache(2 * P, policy=policy)
    cache.access([1], 0, 0, P, P)
    cache.access([2], 0, 1, P, P)
    hammer(cache, 2, 5000, 2)
    assert len(cache._victims) <= 4 * cache.num_segments + 2048 + 1024
    assert cache.evict(P) and pages(cache) == [2]
    cache.check_invariants()


def test_block_mode_compaction_keeps_an_inner_segment_a_victim():
    """Block mode under FIFO, capacity 4 pages: [1, 2] then [1, 2, 3] at t=0 (a child [3]
    below [1, 2]), then [9] hit 5,000 times. In block mode the inner segment [1, 2] is a
    victim too, and its head holds the first page inserted: after compaction, freeing a
    page takes page 1 (its suffix [2] and below become orphans), not a leaf."""
    cache = block_cache(4 * P, policy="fifo")
    cache.access([1, 2], 0, 0, P, 2 * P)
    cache.access([1, 2, 3], 0, 1, P, 3 * P)
    hammer(cache, 9, 5000, 2)
    assert cache.evict(P) and pages(cache) == [2, 3, 9]
    cache.check_invariants()


def test_block_mode_compaction_keeps_deadlines_of_every_segment():
    """Block mode, sliding TTL 100: [1] at t=0 (deadline 100), then [5] hit 3,000 times
    (t < 30: its deadline rises to about 130). Both queues compact; at t=120 page 1 expires
    and page 5 does not."""
    cache = block_cache(10 * P, ttl=100)
    cache.access([1], 0, 0, P, P)
    hammer(cache, 5, 3000, 1)
    assert len(cache._deadlines) <= 4 * cache.num_segments + 2048 + 1024
    assert cache.expire(120) == 1 and pages(cache) == [5]
    cache.check_invariants()
