"""SegmentCache's own contract where the differential suites were silent (found by
mutation testing): eviction's page arithmetic at its boundaries, expire's count, a split's
statistics, heap compaction, `__repr__`, and `check_invariants` failing on corrupted trees.
Pages hold P = 4 tokens unless said otherwise; `access(ids, now, recency, P, L)` is one
Part A request of L tokens."""

from __future__ import annotations

from array import array

import pytest

from prefixsim.cache import POLICIES, TTLRule
from prefixsim.cache.policy import Policy
from prefixsim.cache.segment_tree import SegmentCache

P = 4


def segment_cache(capacity=None, ttl=None, policy="lru") -> SegmentCache:
    return SegmentCache(capacity, POLICIES.build(policy), None if ttl is None else TTLRule(ttl))


def leaf_ids(cache: SegmentCache) -> list[tuple[int, ...]]:
    return sorted(tuple(s.ids) for s in cache.segments())


@pytest.mark.parametrize("need, pages_left", [(0, 3), (3, 2), (4, 1), (5, 1), (7, 1), (8, 0),
                                               (11, 0)])
def test_evict_frees_whole_pages_from_a_segments_tail(need, pages_left):
    """One segment [1, 2, 3] of 4 + 4 + 3 = 11 tokens in a cache of exactly 11. Freeing
    `need` tokens takes pages from the tail: the last page holds 3, so 1-3 tokens take 1
    page, 4-7 take 2 (3 + 4 = 7), 8-11 take all 3 (a need of 4 takes 2 pages: the last one
    frees only 3). 0 frees nothing and succeeds."""
    cache = segment_cache(capacity=11)
    cache.access([1, 2, 3], 0, 0, P, 11)
    need_pages = 3 - pages_left
    assert cache.evict(need) is True
    assert cache.num_pages == 3 - need_pages
    assert cache.counters.evicted_pages == need_pages
    if pages_left:
        assert leaf_ids(cache) == [tuple(range(1, pages_left + 1))]
    cache.check_invariants()


def test_evict_on_an_unbounded_cache_or_with_enough_free_space_succeeds_at_once():
    unbounded = segment_cache()
    unbounded.access([1, 2], 0, 0, P, 8)
    assert unbounded.evict(10**9) is True and unbounded.num_pages == 2
    roomy = segment_cache(capacity=16)
    roomy.access([1, 2], 0, 0, P, 8)
    assert roomy.evict(8) is True and roomy.num_pages == 2  # exactly 8 free: nothing to do
    assert roomy.evict(9) is True and roomy.num_pages == 1


def test_evict_skips_stale_entries_and_goes_on_to_the_next_victim():
    """Capacity 12: [1] at recency 0, [2] at 1, [3] at 2. Page 1 is hit at recency 3, which
    leaves a stale entry for it at the heap's top. Freeing 8 tokens must skip that entry and
    evict the next two LRU victims, [2] and [3]; [1] stays."""
    cache = segment_cache(capacity=12)
    for recency, page in enumerate([1, 2, 3]):
        cache.access([page], recency, recency, P, P)
    cache.access([1], 3, 3, P, P)
    assert cache.evict(8) is True
    assert leaf_ids(cache) == [(1,)]


def test_expire_returns_the_pages_it_freed():
    """TTL 10: [1, 2, 3] at t=0 and [7] at t=5. At t=10.5 the first segment (3 pages)
    expires, [7] (deadline 15) does not: 3. At t=16: 1 more."""
    cache = segment_cache(ttl=10)
    cache.access([1, 2, 3], 0, 0, P, 12)
    cache.access([7], 5, 1, P, 4)
    assert cache.expire(10.5) == 3
    assert cache.expire(16) == 1
    assert cache.counters.expired_pages == 4


def test_a_split_keeps_the_segments_statistics():
    """Priority policy: [1, 2, 3] inserted at t=2 with priority 0; a hit on [1, 2] at t=5
    splits it after page 2. The new prefix [1, 2] keeps created_s 2 and the priority; its
    access is refreshed to 5; the suffix [3] keeps everything."""
    cache = segment_cache(policy="priority")
    cache.access([1, 2, 3], 2, 0, P, 12)
    (whole,) = cache.segments()
    whole.priority = 3
    cache.access([1, 2, 9], 5, 1, P, 12)
    prefix = next(s for s in cache.segments() if tuple(s.ids) == (1, 2))
    suffix = next(s for s in cache.segments() if tuple(s.ids) == (3,))
    assert (prefix.created_s, prefix.priority, prefix.last_access_s) == (2, 3, 5)
    assert (suffix.created_s, suffix.priority, suffix.last_access_s) == (2, 3, 2)
    assert prefix.page_tokens == prefix.last_tokens == P
    cache.check_invariants()


def test_heaps_stay_bounded_under_compaction_and_lru_order_survives():
    """20,000 hits on 10 one-page segments leave stale entries; compaction keeps both heaps
    within 4 x segments + 2048 (+ 1024 operations between looks). Page 0, hit first in the
    last round, is then the first victim."""
    cache = segment_cache(capacity=10 * P, ttl=1e9)
    for page in range(10):
        cache.access([page], 0, page, P, P)
    recency = 10
    for step in range(2000):
        for page in range(10):
            cache.access([page], step, recency, P, P)
            recency += 1
    bound = 4 * cache.num_segments + 2048 + 1024
    assert len(cache._victims) <= bound and len(cache._deadlines) <= bound
    assert cache.evict(P) and leaf_ids(cache) == [(p,) for p in range(1, 10)]
    cache.check_invariants()


def test_repr_names_the_run_and_a_new_segment_starts_unhit_at_priority_0():
    cache = segment_cache()
    cache.access([5, 6, 7], 0, 3, P, 10)
    (segment,) = cache.segments()
    assert repr(segment) == "Segment(ids=5..7 x3, depth=0, tokens=10, recency=3)"
    assert (segment.num_hits, segment.priority) == (0, 0)
    cache.access([5, 6, 7], 1, 4, P, 10)
    assert segment.num_hits == 1


def test_compaction_keeps_an_untouched_victim_and_its_deadline():
    """Capacity 2 pages, sliding TTL 100: [1] and [2] at t=0. Page 2 is hit 3,000 times
    (t < 50, deadline now up to 150), which leaves thousands of stale entries and makes the
    heaps compact; page 1's one entry in each heap is valid and must survive compaction:
    at t=120 page 1 expires (deadline 100) and page 2 does not; and before that, freeing a
    page's tokens takes page 1, the least recently used."""
    for check in ("evict", "expire"):
        cache = segment_cache(capacity=2 * P, ttl=100)
        cache.access([1], 0, 0, P, P)
        cache.access([2], 0, 1, P, P)
        for step in range(3000):
            cache.access([2], step / 100, 2 + step, P, P)
        if check == "evict":
            assert cache.evict(P) and leaf_ids(cache) == [(2,)]
        else:
            assert cache.expire(120) == 1 and leaf_ids(cache) == [(2,)]


def test_compaction_keeps_a_multi_page_victim_queued_once():
    """Capacity 3 pages, TTL 10^6: [1, 2] (one segment, its victim entry never re-queued)
    and [3] at t=0. Page 3 is hit 3,000 times (two heap entries each), so the heaps compact;
    the entry of [1, 2] (version 0, depth key -1) is valid and must survive: freeing a
    page's tokens then takes page 2, the tail of the least recently used segment."""
    cache = segment_cache(capacity=3 * P, ttl=10**6)
    cache.access([1, 2], 0, 0, P, 2 * P)
    cache.access([3], 0, 1, P, P)
    for step in range(3000):
        cache.access([3], step / 100, 2 + step, P, P)
    assert cache.evict(P) and leaf_ids(cache) == [(1,), (3,)]
    cache.check_invariants()


def _corruptible() -> SegmentCache:
    cache = segment_cache(capacity=100, ttl=100)
    cache.access([1, 2, 3], 0, 0, P, 12)
    cache.access([1, 2, 8], 1, 1, P, 12)  # split: [1, 2] with children [3] and [8]
    cache.check_invariants()
    return cache


def _node(cache: SegmentCache, ids: tuple[int, ...]):
    return next(s for s in cache.segments() if tuple(s.ids) == ids)


@pytest.mark.parametrize("edit, message", [
    (lambda c: setattr(_node(c, (3,)), "resident", False), "empty or gone segment in the tree"),
    (lambda c: setattr(_node(c, (3,)), "ids", array("q")), None),
    (lambda c: setattr(_node(c, (3,)), "num_tokens", 5), None),
    (lambda c: setattr(_node(c, (3,)), "last_tokens", 1), None),
    (lambda c: setattr(_node(c, (3,)), "depth", 5), "depth"),
    (lambda c: setattr(_node(c, (8,)), "deadline_s", 1e9), "parent expires before child"),
    (lambda c: _node(c, (1, 2)).children.pop(3) and
     _node(c, (1, 2)).children.__setitem__(3, _node(c, (8,))), None),
    (lambda c: setattr(_node(c, (1, 2)), "depth", 1), None),
    (lambda c: c._ids.add(99), "resident ids"),
    (lambda c: c._ids.discard(8), "resident ids"),
    (lambda c: (c._ids.discard(8), c._ids.add(99)), "resident ids"),  # same size, other ids
    (lambda c: setattr(c, "num_segments", 7), "segment count"),
    (lambda c: setattr(c, "resident_tokens", 13), "resident tokens"),
    (lambda c: setattr(c, "capacity_tokens", 10), "capacity exceeded"),
])
def test_check_invariants_fails_on_a_corrupted_tree(edit, message):
    cache = _corruptible()
    edit(cache)
    with pytest.raises(AssertionError, match=None if message is None else f"^{message}$"):
        cache.check_invariants()


def test_check_invariants_fails_on_a_root_listed_under_another_id():
    cache = _corruptible()
    cache._roots[7] = cache._roots.pop(1)
    with pytest.raises((AssertionError, KeyError)):
        cache.check_invariants()


def test_evict_says_when_the_space_cannot_be_freed():
    """Capacity 11, one segment of 11 tokens, one page locked by nothing: freeing 12 tokens
    is impossible: everything is evicted and evict says False (need left: 1)."""
    cache = segment_cache(capacity=11)
    cache.access([1, 2, 3], 0, 0, P, 11)
    assert cache.evict(12) is False
    assert cache.num_pages == 0 and cache.resident_tokens == 0


# ------------------------------------------------- more gaps mutation testing found
def test_the_constructor_checks_and_keeps_what_it_is_given():
    policy = POLICIES.build("lru")
    cache = SegmentCache(None, policy)
    assert cache.policy is policy and cache.mode == "radix"
    assert (cache.locked_tokens, cache.reserved_tokens, cache.evictable_tokens) == (0, 0, 0)
    with pytest.raises(ValueError, match="^capacity_tokens must be >= 0, got -1$"):
        SegmentCache(-1, policy)
    class PerPage(Policy):  # a key per page, declaring none of what segments need
        def key(self, page):
            return page.page_id

    with pytest.raises(ValueError, match="^policy PerPage cannot run on segments "):
        SegmentCache(None, PerPage())


def test_hits_are_counted_per_segment():
    cache = segment_cache()
    cache.access([1, 2], 0, 0, P, 8)
    for now in (1, 2, 3):
        cache.access([1, 2], now, now, P, 8)
    assert cache.segments()[0].num_hits == 3


def test_insert_takes_a_list_and_says_how_many_pages_it_placed():
    """insert([1, 2, 3]) from a list into room for 2 pages places 2; an empty run 0."""
    cache = segment_cache(capacity=2 * P)
    assert cache.insert_run(None, [1, 2, 3], 0, P, P, 0, 0) == 2
    assert cache.insert_run(None, [7], 1, P, P, 0, 1) == 0
    assert leaf_ids(cache) == [(1, 2)]


def test_insert_into_a_full_cache_places_nothing_and_says_so():
    """Room for 2 pages, [1, 2] resident: inserting [7] (new, 1 page) places 0 pages, and
    nothing changes (insert never evicts)."""
    cache = segment_cache(capacity=2 * P)
    cache.access([1, 2], 0, 0, P, 2 * P)
    assert cache.insert_run(None, [7], 0, P, P, 1, 1) == 0
    assert leaf_ids(cache) == [(1, 2)] and cache.resident_tokens == 2 * P
    assert cache.counters.inserted_pages == 2


def test_an_insert_raises_every_ancestor_deadline():
    """Fixed TTL 10 (hits do not refresh): [1, 2, 3] at t=0; [1, 5] at t=1 splits [1] off and
    hangs [5] (deadline 11) below it, raising [1] to 11; [1, 5, 7] at t=2 hangs [7] (12) and
    raises [5] and [1] to 12: a parent never expires before its child."""
    from prefixsim.cache import TTLMode

    cache = SegmentCache(None, POLICIES.build("lru"), TTLRule(10, TTLMode.FIXED))
    cache.access([1, 2, 3], 0, 0, P, 12)
    cache.access([1, 5], 1, 1, P, 8)
    cache.access([1, 5, 7], 2, 2, P, 12)
    deadlines = {tuple(s.ids): s.deadline_s for s in cache.segments()}
    assert deadlines == {(1,): 12, (2, 3): 10, (5,): 12, (7,): 12}
    cache.check_invariants()


def test_evict_skips_the_protected_segment_and_takes_the_next():
    """[1] (recency 0) and [2] (recency 1), capacity 2 pages: freeing a page's tokens with
    [1] protected takes [2] instead; [1] stays."""
    cache = segment_cache(capacity=2 * P)
    cache.access([1], 0, 0, P, P)
    cache.access([2], 1, 1, P, P)
    protect = next(s for s in cache.segments() if tuple(s.ids) == (1,))
    assert cache.evict(P, protect) and leaf_ids(cache) == [(1,)]


def test_expire_counts_every_segment_it_frees():
    cache = segment_cache(ttl=10)
    cache.access([1, 2, 3], 0, 0, P, 12)
    cache.access([7], 1, 1, P, 4)
    assert cache.expire(20) == 4


@pytest.mark.parametrize("bad", [2**63, -2**63 - 1, 1.5, "7"])
def test_an_id_outside_64_bits_is_refused_by_name(bad):
    """The compressed cache keeps ids as signed 64-bit integers (the trace readers accept
    no others); an id handed in through the API outside that range is named."""
    cache = SegmentCache(100, POLICIES.build("lru"))
    with pytest.raises(ValueError, match=f"page id {bad!r} is not an integer of 64 bits"):
        cache.access([1, bad], 0, 0, P, 2 * P)
    assert cache.num_pages == 0 and cache.segments() == []
    assert cache.access([2**63 - 1, -2**63], 1, 1, P, 2 * P) == 0 and cache.num_pages == 2


@pytest.mark.parametrize("first,stop", [(0, 4), (4, -1), (-1, 2), (3, 2)])
def test_bounds_outside_the_ids_are_refused_before_anything_changes(first, stop):
    """Compiled, the ids are read without bounds checks (cache/id_arrays.py), so `access`
    and `insert` refuse a part of the ids that is not inside them, on both paths."""
    cache = SegmentCache(10, POLICIES.build("lru"))
    ids = array("q", [1, 2, 3])
    with pytest.raises(ValueError, match="out of 3 page ids"):
        cache.access(ids, 0.0, 0, 1, 3, first, stop)
    if first < 0 or stop > 3:  # insert takes an empty or backward part as nothing
        with pytest.raises(ValueError, match="out of 3 page ids"):
            cache.insert_run(None, ids, first, 1, 1, 0.0, 0, stop=stop)
    assert cache.num_segments == 0 and cache.resident_tokens == 0
    cache.check_invariants()
