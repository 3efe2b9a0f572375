"""Known-answer tests of docs/cache-semantics.md Part A and Part C, worked by hand on tiny traces.

Pages hold P = 4 tokens unless said otherwise; page ids are small ints, chained (an id names
its whole prefix). `replay` runs the cache-only engine; the other tests drive the cache
directly. Each docstring works the expected figures out; the asserts only restate them.
Every test runs on the package's cache (`SegmentCache`) and on the per-page reference
(tests/radix_reference.py), but for the few that name single pages of a run the segment
cache keeps as one (`on_the_reference_only`).
"""

from __future__ import annotations

import pytest
from fakes import page_of, resident
from radix_reference import RadixCache

from prefixsim.cache import POLICIES, SegmentCache, TTLMode, TTLRule
from prefixsim.engine import replay_cache_only
from prefixsim.errors import InputError
from prefixsim.trace import Request

P = 4
# each test runs on the package's cache and on the per-page reference (conftest: each_cache)
pytestmark = pytest.mark.usefixtures("each_cache")
Cache = SegmentCache

# a test that reads or touches one page of a run that SegmentCache holds as one segment
on_the_reference_only = pytest.mark.parametrize("each_cache", ["reference"], indirect=True)


def req(t: float, ids: list[int], tokens: int | None = None, page: int = P) -> Request:
    """A request at `t` s over chained `ids`; `tokens` defaults to full pages."""
    return Request(
        request_id=0,
        arrival_s=t,
        input_tokens=len(ids) * page if tokens is None else tokens,
        output_tokens=1,
        page_ids=tuple(ids),
        page_size_tokens=page,
    )


def replay(requests, capacity=None, ttl=None, mode=TTLMode.SLIDING):
    rule = None if ttl is None else TTLRule(ttl, mode)
    cache = Cache(capacity, POLICIES.build("lru"), rule)
    requests = [
        Request(i, r.arrival_s, r.input_tokens, r.output_tokens, r.page_ids, r.page_size_tokens)
        for i, r in enumerate(requests)
    ]
    result = replay_cache_only(requests, cache)
    cache.check_invariants()
    return [r.cached_tokens for r in result.records], result.counters, cache


def lru_cache(capacity=None, ttl=None, mode=TTLMode.SLIDING):
    rule = None if ttl is None else TTLRule(ttl, mode)
    return Cache(capacity, POLICIES.build("lru"), rule)


# ------------------------------------------------------------------ Part A, rule 1
def test_match_longest_resident_prefix():
    """r0 [1,2,3] caches three pages. r1 [1,2,5,6] (L=15) shares 1,2: hit 2 pages = 8.
    r2 [1,9,10] shares only page 1: hit 4. r3 [7] shares nothing: 0."""
    hits, counters, cache = replay(
        [req(0, [1, 2, 3]), req(1, [1, 2, 5, 6], 15), req(2, [1, 9, 10]), req(3, [7])]
    )
    assert hits == [0, 8, 4, 0]
    assert resident(cache) == {1, 2, 3, 5, 6, 9, 10, 7}
    # tokens held: 3*4 + (4 + 3) + 2*4 + 4 = 12 + 7 + 8 + 4
    assert cache.resident_tokens == 31
    assert counters.inserted_pages == 8 and counters.evicted_pages == 0


def test_hit_is_capped_at_prompt_length_minus_one():
    """r0 [1,2] L=8 inserts 4+4. r1 same prompt: matched 8 tokens, capped at L-1 = 7.
    r2 [1,2,3] L=9 (pages 4,4,1): matched 8 <= L-1 = 8, hit 8. r3 same as r2: matched all
    9 tokens, capped at 8."""
    hits, _, cache = replay(
        [req(0, [1, 2]), req(1, [1, 2]), req(2, [1, 2, 3], 9), req(3, [1, 2, 3], 9)]
    )
    assert hits == [0, 7, 8, 8]
    assert page_of(cache, 3).num_tokens == 1


def test_single_token_prompt_never_hits():
    """L=1: the cap L-1 = 0, so even a resident page gives no hit."""
    hits, _, _ = replay([req(0, [1], 1), req(1, [1], 1)])
    assert hits == [0, 0]


def test_edge_case_3_fully_cached_prompt_still_computes_one_token():
    """Part C 3, P=1: a 1000-token prompt replayed twice hits 999 of 1000 the second time."""
    ids = list(range(1, 1001))
    hits, _, _ = replay([req(0, ids, page=1), req(1, ids, page=1)])
    assert hits == [0, 999]


def test_unchained_ids_are_an_input_error():
    """Page 2 cached after 1 cannot reappear after 7: the ids are not chained."""
    with pytest.raises(InputError) as info:
        replay([req(0, [1, 2]), req(1, [7, 2])])
    assert info.value.field == "hash_ids"


# ------------------------------------------------------------------ Part A, rule 2
def test_refresh_uses_logical_recency_with_equal_timestamps():
    """All at t=0, capacity 16 tokens (4 pages), positions r0..r5 are the recencies.
    r0 [1,2], r1 [3,4]: full. r2 [1,2]: hit 7, refreshes 1,2 to recency 2.
    r3 [5]: leaves 2 (rec 2) and 4 (rec 1): evict 4 -> {1,2,3,5}.
    r4 [3,4]: hit 4 on page 3 (now rec 4, protected); leaves 2 (rec 2), 5 (rec 3): evict 2,
    insert 4 -> {1,3,4,5}. r5 [1,2]: hit 4 on page 1; needs 4 tokens: leaves 1 (rec 5,
    protected), 5 (rec 3), 4 (rec 4): evict 5 -> {1,2,3,4}.
    A timestamp-ordered LRU could not tell r2's refresh from r0's insert."""
    hits, counters, cache = replay(
        [req(0, [1, 2]), req(0, [3, 4]), req(0, [1, 2]), req(0, [5]), req(0, [3, 4]),
         req(0, [1, 2])],
        capacity=16,
    )
    assert hits == [0, 0, 7, 0, 4, 4]
    assert counters.evicted_pages == 3 and counters.evicted_tokens == 12
    assert resident(cache) == {1, 2, 3, 4}


def test_refresh_covers_the_whole_matched_path():
    """Capacity 16. r0 [1,2,3] (rec 0), r1 [9] (rec 1). r2 [1,2] L=8 hits 7 and refreshes
    1 and 2 (2 is not a leaf: 3 hangs below it) to rec 2. r3 [10]: leaves 3 (rec 0), 9 (rec 1):
    evict 3; now 2 is a leaf with rec 2. r4 [11]: leaves 2 (rec 2), 9 (rec 1), 10 (rec 3):
    evict 9 (had page 2 kept its insert recency 0, it would go instead)."""
    hits, counters, cache = replay(
        [req(0, [1, 2, 3]), req(1, [9]), req(2, [1, 2]), req(3, [10]), req(4, [11])],
        capacity=16,
    )
    assert hits == [0, 0, 7, 0, 0]
    assert resident(cache) == {1, 2, 10, 11}
    assert counters.evicted_pages == 2
    assert page_of(cache, 1).recency == 2 and page_of(cache, 2).recency == 2


def test_touch_refreshes_every_page_of_the_path():
    """touch on [1,2,3] at t=7, recency 5: all three get last access 7, recency 5 and one
    more hit."""
    cache = lru_cache()
    cache.insert(None, [1, 2, 3], [4, 4, 4], now=0, recency=0)
    match = cache.match([1, 2, 3, 4], now=7)
    assert match.num_pages == 3
    cache.touch(match.pages, now=7, recency=5)
    for page_id in (1, 2, 3):
        page = page_of(cache, page_id)
        assert (page.last_access_s, page.recency, page.num_hits) == (7, 5, 1)


# ------------------------------------------------------------------ Part A, rule 3
def test_edge_case_8_evict_one_leaf_page_at_a_time():
    """Part C 8. Capacity 16. r0 [1,2,3] (12 tokens), r1 [4]: full. r2 [5] needs 4 tokens:
    the LRU leaf is 3 (rec 0); evicting it frees exactly 4, so 1 and 2 stay (evicting the
    whole branch 1-2-3 would overshoot). r3 [1,2,3]: hit 8 on 1,2; needs 4: leaves 2 (rec 3,
    protected), 4 (rec 1), 5 (rec 2): evict 4."""
    hits, counters, cache = replay(
        [req(0, [1, 2, 3]), req(1, [4]), req(2, [5]), req(3, [1, 2, 3])], capacity=16
    )
    assert hits == [0, 0, 0, 8]
    assert counters.evicted_pages == 2 and counters.evicted_tokens == 8
    assert resident(cache) == {1, 2, 3, 5}


def test_a_parent_left_as_leaf_waits_for_older_leaves():
    """Capacity 12. r0 [1,2] (rec 0), r1 [3] (rec 1): full. r2 [1] L=4 hits 3 (L-1) and
    refreshes 1 to rec 2. r3 [4,5] needs 8 tokens: leaves 2 (rec 0) and 3 (rec 1); 2 goes,
    which leaves 1 a leaf of rec 2, younger than 3: so 3 goes next, not 1; 4 and 5 fill the
    cache. r4 [1,6]: hit 4 on page 1 (protected); the only other leaf is 5: evicted, 6 in."""
    hits, counters, cache = replay(
        [req(0, [1, 2]), req(1, [3]), req(2, [1]), req(3, [4, 5]), req(4, [1, 6])],
        capacity=12,
    )
    assert hits == [0, 0, 3, 0, 4]
    assert counters.evicted_pages == 3
    assert resident(cache) == {1, 4, 6}


def test_matched_path_is_protected_and_insert_stops_when_full():
    """Capacity 12. r0 [1,2] (rec 0), r1 [3] (rec 1): full. r2 [1,2,4,5] hits 8 on 1,2
    (rec 2) and needs 8 tokens: leaf 3 goes (4 freed); the only other leaf is 2, protected,
    so eviction stops short. Insert: 4 fits (12 tokens), 5 does not.
    r3 [1,2,4,5]: hit 12 on 1,2,4; 5 still does not fit and nothing else may go."""
    hits, counters, cache = replay(
        [req(0, [1, 2]), req(1, [3]), req(2, [1, 2, 4, 5]), req(3, [1, 2, 4, 5])],
        capacity=12,
    )
    assert hits == [0, 0, 8, 12]
    assert counters.evicted_pages == 1
    assert resident(cache) == {1, 2, 4}
    assert cache.resident_tokens == 12


def test_request_larger_than_capacity_keeps_its_first_pages():
    """Capacity 8. r0 [1]. r1 [2,3,4] needs 12: evict 1 (nothing else), insert 2 and 3,
    4 does not fit. r2 [2,3,4]: hit 8 (pages 2,3); insert of 4 still fails (2,3 protected)."""
    hits, counters, cache = replay([req(0, [1]), req(1, [2, 3, 4]), req(2, [2, 3, 4])],
                                   capacity=8)
    assert hits == [0, 0, 8]
    assert counters.evicted_pages == 1
    assert resident(cache) == {2, 3}


def test_zero_capacity_caches_nothing():
    hits, counters, cache = replay([req(0, [1, 2]), req(1, [1, 2])], capacity=0)
    assert hits == [0, 0]
    assert cache.num_pages == 0 and counters.inserted_pages == 0


# ------------------------------------------------------------------ Part A, rule 4
def test_insert_in_order_as_many_as_fit():
    """Capacity 10, fresh cache. r0 [1,2,3] (4,4,4): 1 and 2 fit (8 tokens); 3 would make 12.
    The chain stops at the first page that does not fit. r1 same: hit 8."""
    hits, _, cache = replay([req(0, [1, 2, 3]), req(1, [1, 2, 3])], capacity=10)
    assert hits == [0, 8]
    assert resident(cache) == {1, 2}
    assert cache.resident_tokens == 8


def test_capacity_counts_tokens_held_with_a_partial_last_page():
    """Capacity 10. r0 [1,2,3] L=10 holds 4+4+2 = 10 tokens: exactly full, all fit.
    r1 same prompt: hit 9 (L-1). r2 [4] L=1 needs 1 token: evict LRU leaf 3 (2 tokens),
    resident 8 + 1 = 9."""
    hits, counters, cache = replay(
        [req(0, [1, 2, 3], 10), req(1, [1, 2, 3], 10), req(2, [4], 1)], capacity=10
    )
    assert hits == [0, 9, 0]
    assert counters.evicted_pages == 1 and counters.evicted_tokens == 2
    assert cache.resident_tokens == 9
    assert counters.peak_tokens == 10


# ---------------------------------------------------------------------------- TTL
def test_sliding_ttl_alive_through_deadline_gone_after():
    """TTL 10 s, sliding. r0 [1,2] at 0: deadline 10. r1 at 10: alive (through t+ttl),
    hit 7, deadline 20. r2 at 20: hit 7, deadline 30. r3 at 30.5: both expired (2 pages,
    8 tokens), miss; they are expirations, never evictions."""
    hits, counters, _ = replay(
        [req(0, [1, 2]), req(10, [1, 2]), req(20, [1, 2]), req(30.5, [1, 2])], ttl=10
    )
    assert hits == [0, 7, 7, 0]
    assert (counters.expired_pages, counters.expired_tokens) == (2, 8)
    assert counters.evicted_pages == 0


def test_fixed_ttl_counts_from_creation():
    """TTL 10 s, fixed. r0 [1,2] at 0: deadline 10, never refreshed. r1 at 10: hit 7.
    r2 at 20: expired (2 pages) and reinserted, deadline 30. r3 at 30.5: expired again."""
    hits, counters, _ = replay(
        [req(0, [1, 2]), req(10, [1, 2]), req(20, [1, 2]), req(30.5, [1, 2])],
        ttl=10, mode=TTLMode.FIXED,
    )
    assert hits == [0, 7, 0, 0]
    assert counters.expired_pages == 4 and counters.evicted_pages == 0


def test_ttl_zero_lives_only_at_its_own_instant():
    """TTL 0: a page inserted at t is alive at t (equal timestamps hit) and gone after."""
    hits, counters, _ = replay([req(0, [1, 2]), req(0, [1, 2]), req(0.001, [1, 2])], ttl=0)
    assert hits == [0, 7, 0]
    assert counters.expired_pages == 2


def test_sliding_ttl_expires_the_unrefreshed_branch_only():
    """TTL 10. r0 [1,2] at 0 (deadlines 10). r1 [1,3] at 5: 1 refreshed to 15, 3 gets 15;
    2 keeps 10. r2 [1,2] at 12: 2 expired (1 page), 1 alive: hit 4, 2 reinserted."""
    hits, counters, cache = replay([req(0, [1, 2]), req(5, [1, 3]), req(12, [1, 2])], ttl=10)
    assert hits == [0, 4, 4]
    assert counters.expired_pages == 1
    assert resident(cache) == {1, 2, 3}


def test_expiry_frees_space_before_eviction():
    """Capacity 8, TTL 5. r0 [1,2] at 0 fills the cache. r1 [3,4] at 6: 1 and 2 are dead
    (deadline 5), so they expire (2 expirations) and no eviction is needed."""
    _, counters, cache = replay([req(0, [1, 2]), req(6, [3, 4])], capacity=8, ttl=5)
    assert (counters.expired_pages, counters.evicted_pages) == (2, 0)
    assert resident(cache) == {3, 4}


def test_edge_case_11_parent_lives_as_long_as_its_child():
    """Part C 11. Page 1 inserted with a 5-minute TTL at 0 (deadline 300), its child 2 with a
    1-hour TTL at 0 (deadline 3600): the parent's deadline is raised to 3600. At 1000 both
    match; at 3601 both expire."""
    cache = lru_cache(ttl=300)
    (page1,) = cache.insert(None, [1], [4], now=0, recency=0, ttl_s=300)
    cache.insert(page1, [2], [4], now=0, recency=1, ttl_s=3600)
    cache.check_invariants()
    assert page1.deadline_s == 3600
    assert cache.match([1, 2], now=1000).num_pages == 2
    assert cache.match([1, 2], now=3601).num_pages == 0
    assert cache.counters.expired_pages == 2


def test_fixed_ttl_parent_outlives_with_new_child():
    """Fixed TTL 300. r0 [1] at 0: deadline 300. r1 [1,2] at 200: hit on 1 (no refresh in
    fixed mode), 2 created with deadline 500, raising 1 to 500. r2 [1,2] at 400: both alive,
    hit 7. r3 [1,2] at 501: both expired."""
    hits, counters, _ = replay(
        [req(0, [1]), req(200, [1, 2]), req(400, [1, 2]), req(501, [1, 2])],
        ttl=300, mode=TTLMode.FIXED,
    )
    assert hits == [0, 4, 7, 0]
    assert counters.expired_pages == 2


def test_reinsert_under_a_reused_prefix_raises_its_deadline():
    """Regression: insert([1,2]) at 5 with TTL 10 reuses resident page 1 (deadline 10) and adds
    2 (deadline 15); 1 must be raised to 15, or it would expire before its child."""
    cache = lru_cache(ttl=10)
    cache.insert(None, [1], [4], now=0, recency=0)
    cache.insert(None, [1, 2], [4, 4], now=5, recency=1)
    cache.check_invariants()
    assert page_of(cache, 1).deadline_s == 15
    assert cache.match([1, 2], now=12).num_pages == 2


def test_reused_prefix_with_nothing_new_keeps_its_deadline():
    """Capacity 4 is full with page 1 (deadline 10); insert([1,2]) at 5 reuses 1, cannot fit 2,
    and must not raise page 1's deadline since no descendant was added."""
    cache = lru_cache(capacity=4, ttl=10)
    cache.insert(None, [1], [4], now=0, recency=0)
    placed = cache.insert(None, [1, 2], [4, 4], now=5, recency=1)
    assert len(placed) == 1 and resident(cache) == {1}
    assert page_of(cache, 1).deadline_s == 10


# ------------------------------------------------------------------ Part C, locks
def test_edge_case_1_ttl_runs_out_while_locked():
    """Part C 1. TTL 10. [1,2] inserted at 0 (deadline 10) and locked at 2. At 20 an expiry
    sweep frees nothing (locked pages never expire); unlock at 20 with no refresh frees both,
    counted as expirations."""
    cache = lru_cache(ttl=10)
    _, page2 = cache.insert(None, [1, 2], [4, 4], now=0, recency=0)
    cache.lock(page2)
    assert cache.expire(20) == 0
    assert cache.num_pages == 2 and cache.locked_tokens == 8
    cache.unlock(page2, now=20)
    cache.check_invariants()
    assert cache.num_pages == 0
    assert cache.counters.expired_pages == 2 and cache.counters.evicted_pages == 0


def test_edge_case_2_parent_evictable_in_the_same_pass():
    """Part C 2. Capacity 12: [1,2] at recency 0, [3] at recency 1. evict(8) needs 8 tokens
    (nothing free): leaf 2 (rec 0) goes, which makes 1 a leaf (rec 0, older than 3), so 1 goes
    in the same pass; 3 stays."""
    cache = lru_cache(capacity=12)
    cache.insert(None, [1, 2], [4, 4], now=0, recency=0)
    cache.insert(None, [3], [4], now=0, recency=1)
    assert cache.evict(8) is True
    cache.check_invariants()
    assert resident(cache) == {3}
    assert cache.counters.evicted_pages == 2


def test_edge_case_2_never_while_a_descendant_is_locked():
    """Part C 2, locked. Capacity 16: [1,2] and [1,4] at recency 0, [3] at recency 1; 4 is
    locked (so 1 is too). evict(12): leaf 2 goes (rec 0), 1 is not a leaf and locked anyway,
    4 is locked, so 3 goes; 8 tokens freed of 12: evict returns False."""
    cache = lru_cache(capacity=16)
    cache.insert(None, [1, 2], [4, 4], now=0, recency=0)
    page1 = cache.match([1], now=0).last  # (a segment [1, 2] splits after page 1)
    (page4,) = cache.insert(page1, [4], [4], now=0, recency=0)
    cache.insert(None, [3], [4], now=0, recency=1)
    cache.lock(page4)
    assert cache.evictable_tokens == 8
    assert cache.evict(12) is False
    cache.check_invariants()
    assert resident(cache) == {1, 4}
    cache.unlock(page4, now=0)
    assert cache.evict(12) is True  # 8 free, needs 4 more: leaf 4 only
    assert resident(cache) == {1}


def test_edge_case_9_not_enough_evictable_space():
    """Part C 9. Capacity 12, [1,2] locked, [3] unlocked. evict(12): free 0 + evictable 4 < 12,
    so the call fails; only page 3 (the evictable part) is freed, the locked path stays.
    A scheduler can see in advance that free + evictable_tokens < need."""
    cache = lru_cache(capacity=12)
    _, page2 = cache.insert(None, [1, 2], [4, 4], now=0, recency=0)
    cache.insert(None, [3], [4], now=0, recency=1)
    cache.lock(page2)
    assert cache.free_tokens + cache.evictable_tokens == 4 == cache.available_tokens()
    assert cache.evict(12) is False
    cache.check_invariants()
    assert resident(cache) == {1, 2}
    assert cache.counters.evicted_pages == 1


def test_available_tokens_is_free_plus_evictable():
    """Capacity 20: [1,2] (8 tokens) locked, [3] (4) unlocked, 3 reserved: free 20 - 12 - 3
    = 5, evictable 4, so a reservation can have 9; unbounded, any amount."""
    cache = lru_cache(capacity=20)
    _, page2 = cache.insert(None, [1, 2], [4, 4], now=0, recency=0)
    cache.insert(None, [3], [4], now=0, recency=1)
    cache.lock(page2)
    cache.reserve(3)
    assert (cache.free_tokens, cache.evictable_tokens, cache.available_tokens()) == (5, 4, 9)
    assert lru_cache(capacity=None).available_tokens() == float("inf")


def test_evict_within_free_space_evicts_nothing():
    cache = lru_cache(capacity=12)
    cache.insert(None, [1], [4], now=0, recency=0)
    assert cache.evict(8) is True
    assert cache.counters.evicted_pages == 0


def test_unlock_of_an_unlocked_page_is_an_error():
    cache = lru_cache()
    (page,) = cache.insert(None, [1], [4], now=0, recency=0)
    with pytest.raises(ValueError, match="unlock of an unlocked (page|segment)"):
        cache.unlock(page, now=0)


# ------------------------------------------------------------------ Part C, ties
def test_edge_case_15_equal_timestamps_evict_in_tie_order():
    """Part C 15 on the tree: leaves inserted with the same recency (0) go by depth first
    (deeper first), then by page id. Capacity 16: [1,2] and [3] and [4] at recency 0.
    evict(4) -> 2 (depth 1). evict(8) -> 1 is now a depth-0 leaf tied with 3 and 4 on
    (recency, depth): the lowest page id goes, 1; then 3."""
    cache = lru_cache(capacity=16)
    cache.insert(None, [1, 2], [4, 4], now=0, recency=0)
    cache.insert(None, [4], [4], now=0, recency=0)
    cache.insert(None, [3], [4], now=0, recency=0)
    cache.evict(4)
    assert resident(cache) == {1, 3, 4}
    cache.evict(12)
    assert resident(cache) == {4}


def test_edge_case_15_equal_timestamps_replay_is_bit_identical():
    """Part C 15 on the replay: twelve requests at one timestamp in a cache of 5 pages; the
    victims follow replay order, and two runs give identical records and counters. Worked:
    r0..r4 insert [1],[2],[3],[4],[5]; r5 [1,6] hits 4 on 1 (rec 5), needs a page: the
    LRU leaf is 2 -> {1,3,4,5,6}; r6 [2] evicts 3; r7 [3] evicts 4; r8 [4] evicts 5;
    r9 [5] evicts 6 (rec 5; 1 is not a leaf yet), which makes 1 a leaf of rec 5, older than
    2..5 (rec 6..9); so r10 [7] evicts 1 and r11 [1] evicts 2."""
    trace = [req(0, [i]) for i in (1, 2, 3, 4, 5)] + [req(0, [1, 6])] + [
        req(0, [i]) for i in (2, 3, 4, 5, 7, 1)
    ]
    first = replay(trace, capacity=20)
    second = replay(trace, capacity=20)
    assert first[0] == second[0] == [0] * 5 + [4] + [0] * 6
    assert first[1] == second[1]
    assert first[1].evicted_pages == 7
    assert resident(first[2]) == resident(second[2]) == {3, 4, 5, 7, 1}


# ------------------------------------------------ R12 in block mode: raised deadlines
@pytest.mark.parametrize("mode", ["radix", "block"])
def test_a_deadline_raised_by_a_childs_insert_holds_in_both_modes(mode):
    """TTLRule(10, fixed). Insert [1] at t=0: page 1 deadline 10. A hit at t=5 does not
    refresh a fixed TTL. Insert [2] below page 1 at t=5: page 2 deadline 15, and page 1 is
    raised to 15 (R12: a parent lives as long as its children). Match [1, 2] at t=12:
    12 <= 15, both pages alive: 2 pages in radix and in block mode alike (block mode used to
    expire page 1 at its old queue entry, t=10, leaving page 2 an orphan)."""
    from prefixsim.cache import CacheMode

    cache = Cache(None, POLICIES.build("lru"), TTLRule(10, TTLMode.FIXED), mode=CacheMode(mode))
    (one,) = cache.insert(None, [1], [P], now=0, recency=0)
    cache.touch(cache.match([1], 5).pages, now=5, recency=1)
    cache.insert(one, [2], [P], now=5, recency=1)
    assert cache.match([1, 2], 12).num_pages == 2
    assert cache.counters.expired_pages == 0
    cache.check_invariants()
    assert cache.match([1, 2], 15.5).num_pages == 0  # both gone after t = 15
    assert cache.counters.expired_pages == 2


def test_block_mode_replay_with_a_fixed_ttl_counts_the_hits_radix_counts():
    """The same three requests replayed in both modes, TTL 10 fixed, P=4: r0 [1] at 0 (miss),
    r1 [1,2] at 5 hits page 1 (4 tokens), inserts page 2 (deadlines 15); r2 [1,2,3] at 12
    hits pages 1, 2 (8 tokens). Hits [0, 4, 8] in both modes."""
    from prefixsim.cache import CacheMode

    for mode in (CacheMode.RADIX, CacheMode.BLOCK):
        cache = Cache(None, POLICIES.build("lru"), TTLRule(10, TTLMode.FIXED), mode=mode)
        requests = [Request(i, t, len(ids) * P, 1, tuple(ids), P)
                    for i, (t, ids) in enumerate([(0, [1]), (5, [1, 2]), (12, [1, 2, 3])])]
        result = replay_cache_only(requests, cache)
        assert [r.cached_tokens for r in result.records] == [0, 4, 8], mode


@on_the_reference_only  # touches page 2 of segment [1, 2] alone
def test_block_mode_adoption_raises_the_parents_deadline():
    """Block mode, sliding TTL 10, P=4. t=0 insert [1, 2] (deadlines 10). t=8 touch page 2
    alone (block mode queues each page on its own): page 2's deadline becomes 18. At t=10.5
    page 1 expires (10 < 10.5); page 2 (18) stays, an orphan of 4 tokens. t=11 insert [1]
    again with a 2 s TTL class: deadline 13. At t=12 match [1, 2] re-adopts page 2, which
    outlives its new parent, so page 1 is raised to 18 (R12): 2 pages, no orphan. At t=15
    both still hold (15 <= 18); at t=19 both have expired."""
    from prefixsim.cache import CacheMode

    cache = RadixCache(None, POLICIES.build("lru"), TTLRule(10), CacheMode.BLOCK)
    one, two = cache.insert(None, [1, 2], [P, P], now=0, recency=0)
    cache.touch([two], now=8, recency=1)
    assert cache.expire(10.5) == 1 and cache.get(1) is None and cache.get(2) is two
    assert cache.orphan_tokens() == P
    cache.insert(None, [1], [P], now=11, recency=2, ttl_s=2)
    assert cache.match([1, 2], 12).num_pages == 2
    assert cache.orphan_tokens() == 0 and cache.get(1).deadline_s == 18
    cache.check_invariants()
    assert cache.match([1, 2], 15).num_pages == 2
    assert cache.match([1, 2], 19).num_pages == 0
