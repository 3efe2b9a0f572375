"""SegmentCache's clear, page listing, run splitting, relock and FIFO head eviction, by hand
(found by mutation testing of cache/segment_tree.py). Pages hold P = 4 tokens;
`access(ids, now, recency, P, L)` is one Part A request of L tokens."""

from __future__ import annotations

import pytest

from prefixsim.cache import POLICIES, CacheMode, ChainConflict, TTLRule
from prefixsim.cache.segment_tree import SegmentCache
from prefixsim.trace import Request

P = 4


def test_clear_tells_s3fifo_its_pages_left_unevicted_and_keeps_checking_ids():
    """S3-FIFO keeps a state per page: `clear` tells it every page left, as by expiry (none
    enters the ghost list), and the cleared cache still refuses an id after two prefixes."""
    s3 = POLICIES.build("s3fifo")
    cache = SegmentCache(8 * P, s3)
    cache.access([1, 2], 0, 0, P, 2 * P)
    cache.access([1, 2, 3], 1, 1, P, 3 * P)
    cache.clear()
    assert not any(s3.in_ghost(page) for page in (1, 2, 3))
    cache.access([1, 2], 2, 2, P, 2 * P)
    with pytest.raises(ChainConflict):
        cache.access([7, 2], 3, 3, P, 2 * P)
    cache.check_invariants()


def test_pages_lists_each_page_with_its_own_tokens():
    """One segment of 4 + 4 + 3 tokens: only its last page holds the remainder."""
    cache = SegmentCache(None, POLICIES.build("lru"))
    cache.access([1, 2, 3], 0, 0, P, 11)
    assert [(page.page_id, page.num_tokens) for page in cache.pages()] == [(1, 4), (2, 4),
                                                                            (3, 3)]


def test_run_from_past_the_end_of_a_match_is_an_empty_run():
    cache = SegmentCache(None, POLICIES.build("lru"))
    cache.access([1, 2], 0, 0, P, 2 * P)
    run = cache.match([1, 2], 1.0).pages
    tail = cache.run_from(run, 1)
    assert len(tail) == 1 and [tuple(s.ids) for s in tail.segments] == [(2,)]
    empty = cache.run_from(run, 2)
    assert len(empty) == 0 and list(empty.segments) == []


@pytest.mark.parametrize("on_path", [True, False])
def test_relock_frees_expired_pages_as_an_unlock_does(on_path):
    """TTL 10 (sliding): [9] at t=0 (deadline 10) and [1, 2] locked at t=0. At t=20 the
    lock moves to [1, 2, 3] (on the path: [1, 2] keeps its lock, [3] gains one) or to
    [5] (off it: [1, 2] is unlocked), both inserted at t=19 with no match in between.
    Either way the relock frees [9], dead since t=10, as unlock does (R12); off the path
    [1, 2], unlocked and dead too, goes with it."""
    cache = SegmentCache(None, POLICIES.build("lru"), TTLRule(10.0))
    cache.access([9], 0.0, 0, P, P)
    old = cache.insert(None, [1, 2], [P, P], 0.0, 1)[-1]
    cache.lock(old)
    new = cache.insert(old if on_path else None, [3 if on_path else 5], [P], 19.0, 2)[-1]
    assert 9 in cache.page_ids()  # no match since t=0: nothing expired yet
    cache.relock(old, new, 20.0)
    assert sorted(cache.page_ids()) == ([1, 2, 3] if on_path else [5])
    assert cache.counters.expired_pages == (1 if on_path else 3)
    cache.check_invariants()


def test_fifo_head_eviction_fails_when_one_token_short():
    """Block mode under FIFO, capacity 2 pages, full: [1] locked, [2] unlocked. Freeing
    P + 1 tokens can take [2] only (P tokens): it fails, one token short; freeing P
    succeeds."""
    cache = SegmentCache(2 * P, POLICIES.build("fifo"), mode=CacheMode.BLOCK)
    locked = cache.insert(None, [1], [P], 0.0, 0)[-1]
    cache.lock(locked)
    cache.insert(None, [2], [P], 0.0, 1)
    assert not cache.evict(P + 1)
    assert sorted(cache.page_ids()) == [1]
    cache.insert(None, [2], [P], 0.0, 2)
    assert cache.evict(P) and sorted(cache.page_ids()) == [1]


def page_parents(cache: SegmentCache) -> dict[int, int | None]:
    """Each resident page's parent page (None at a root or for an orphan's first page)."""
    out: dict[int, int | None] = {}
    for node in cache.segments():
        ids = list(node.ids)
        above = None if node.parent is None else node.parent.ids[-1]
        for page in ids:
            out[page] = above
            above = page
    return out


def test_an_insert_adopts_orphans_mid_run_and_goes_on_below_each():
    """Block mode under LRU, capacity 13 pages: [0, 1, 2, 3] and [6] at recency 0, [4, 5]
    below 3 and [7, 8] below 6 at recency 5. Freeing 8 pages' worth with 4 free takes the
    deepest pages of recency 0 first, 6, 3, 2, 1: [4, 5] (lost parent 3) and [7, 8] (lost
    parent 6) become orphans. Then [0, ..., 9]: page 0 matches, [1, 2, 3] is inserted below
    it, [4, 5] re-adopted below 3, [6] inserted below 5, [7, 8] re-adopted below 6 and [9]
    inserted below 8: one chain again, nothing orphaned."""
    cache = SegmentCache(13 * P, POLICIES.build("lru"), mode=CacheMode.BLOCK)
    top = cache.insert(None, [0, 1, 2, 3], [P] * 4, 0.0, 0)[-1]
    middle = cache.insert(top, [4, 5], [P, P], 0.0, 5)[-1]
    single = cache.insert(middle, [6], [P], 0.0, 0)[-1]
    cache.insert(single, [7, 8], [P, P], 0.0, 5)
    assert cache.evict(8 * P) and sorted(cache.page_ids()) == [0, 4, 5, 7, 8]
    assert cache.orphan_tokens() == 2 * P  # each orphan's first page
    assert cache.access(list(range(10)), 1.0, 6, P, 10 * P) == 1
    assert page_parents(cache) == {0: None, **{page: page - 1 for page in range(1, 10)}}
    assert cache.orphan_tokens() == 0
    cache.check_invariants()


def test_block_mode_belady_takes_tied_pages_deepest_first():
    """Block mode under Belady: [1, 2], then [1, 2, 3, 4] (a segment [3, 4] below [1, 2],
    all four touched at recency 1), and all four are next used by the same request: their
    keys and recencies tie, so pages leave deepest first (RadixCache's -depth): freeing 2
    pages takes 4 and 3, not 2, which would orphan [3, 4]'s rest."""
    requests = [Request(0, 0.0, 2 * P, 1, (1, 2), P), Request(1, 1.0, 4 * P, 1, (1, 2, 3, 4), P),
                Request(2, 2.0, 4 * P, 1, (1, 2, 3, 4), P)]
    belady = POLICIES.build("belady")
    belady.prepare(requests)
    cache = SegmentCache(4 * P, belady, mode=CacheMode.BLOCK)
    cache.access([1, 2], 0.0, 0, P, 2 * P)
    cache.access([1, 2, 3, 4], 1.0, 1, P, 4 * P)
    assert cache.evict(2 * P) and sorted(cache.page_ids()) == [1, 2]
    assert cache.orphan_tokens() == 0
    cache.check_invariants()


def test_s3fifo_eviction_fails_when_one_token_short():
    """S3-FIFO (a state per page), capacity 2 pages, full: [1] locked, [2] not. Freeing
    P + 1 tokens can take [2] only: it fails, one token short."""
    cache = SegmentCache(2 * P, POLICIES.build("s3fifo"))
    locked = cache.insert(None, [1], [P], 0.0, 0)[-1]
    cache.lock(locked)
    cache.insert(None, [2], [P], 0.0, 1)
    assert not cache.evict(P + 1)
    assert sorted(cache.page_ids()) == [1]


def test_a_page_with_several_live_entries_leaves_once_and_eviction_goes_on():
    """Block mode under Belady keyed by access (a timed replica's cache), capacity 2 pages,
    full: [1] and [2]. Page 1 is touched twice in one step (the same recency), so two
    entries name it with the same key; freeing both pages takes page 1 once (its second
    entry is skipped as taken, not counted again, and does not end the eviction) and then
    page 2."""
    requests = [Request(0, 0.0, P, 1, (1,), P), Request(1, 0.0, P, 1, (2,), P),
                Request(2, 1.0, 2 * P, 1, (1, 2), P)]
    belady = POLICIES.build("belady")
    belady.prepare(requests)
    cache = SegmentCache(2 * P, belady, mode=CacheMode.BLOCK, by_access=True)
    cache.insert(None, [1], [P], 0.0, 0)
    cache.insert(None, [2], [P], 0.0, 0)
    for _ in range(2):
        cache.touch(cache.match([1], 0.5).pages, 0.5, 1)
    assert cache.evict(2 * P) and cache.page_ids() == set()
    assert (cache.counters.evicted_pages, cache.counters.evicted_tokens) == (2, 2 * P)
    cache.check_invariants()
